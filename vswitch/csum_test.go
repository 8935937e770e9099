package vswitch

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"

	"github.com/xvswitch/xvswitch/portspec"
	"github.com/xvswitch/xvswitch/test/netns"
	"github.com/xvswitch/xvswitch/test/require"
)

// l4Frame builds an Ethernet frame carrying TCP or UDP over IPv4 or IPv6
// (vlan: one 802.1Q tag) with payload, its checksum field zero; at is the
// checksum field's offset in the frame, pseudo the pseudo-header's bytes.
func l4Frame(v6, udp, vlan bool, payload []byte) (f []byte, at int, pseudo []byte) {
	f = append(f, 0x02, 0, 0, 0, 0, 2, 0x02, 0, 0, 0, 0, 1)
	if vlan {
		f = append(f, 0x81, 0x00, 0x00, 0x07)
	}
	proto, hdr := byte(protoTCP), 20
	if udp {
		proto, hdr = protoUDP, 8
	}
	l4len := hdr + len(payload)
	var src, dst []byte
	if v6 {
		f = append(f, 0x86, 0xdd)
		ip := make([]byte, 40)
		ip[0] = 0x60
		binary.BigEndian.PutUint16(ip[4:], uint16(l4len))
		ip[6], ip[7] = proto, 64
		for i := 8; i < 40; i++ {
			ip[i] = byte(0xf1 + 3*i)
		}
		src, dst = ip[8:24], ip[24:40]
		f = append(f, ip...)
	} else {
		f = append(f, 0x08, 0x00)
		ip := []byte{0x45, 0, 0, 0, 0x12, 0x34, 0x40, 0, 64, proto, 0, 0, 10, 93, 0, 1, 10, 93, 0, 2}
		binary.BigEndian.PutUint16(ip[2:], uint16(20+l4len))
		src, dst = ip[12:16], ip[16:20]
		f = append(f, ip...)
	}
	l4 := make([]byte, hdr)
	binary.BigEndian.PutUint16(l4[0:], 40000)
	binary.BigEndian.PutUint16(l4[2:], 5001)
	if udp {
		binary.BigEndian.PutUint16(l4[4:], uint16(l4len))
		at = len(f) + 6
	} else {
		l4[12], l4[13] = 5<<4, 0x18
		at = len(f) + 16
	}
	f = append(append(f, l4...), payload...)
	pseudo = append(append(pseudo, src...), dst...)
	if v6 {
		pseudo = binary.BigEndian.AppendUint32(pseudo, uint32(l4len))
		pseudo = append(pseudo, 0, 0, 0, proto)
	} else {
		pseudo = append(pseudo, 0, proto)
		pseudo = binary.BigEndian.AppendUint16(pseudo, uint16(l4len))
	}
	return f, at, pseudo
}

// refSum is the one's-complement sum of the Internet checksum, byte by
// byte (even offsets high), as plainly as it can be written: the
// reference the fast routine is checked against.
func refSum(parts ...[]byte) uint16 {
	var s uint32
	for _, p := range parts {
		for i, c := range p {
			if i%2 == 0 {
				s += uint32(c) << 8
			} else {
				s += uint32(c)
			}
		}
	}
	for s > 0xffff {
		s = s>>16 + s&0xffff
	}
	return uint16(s)
}

// l4Of is the L4 segment of a frame built by l4Frame.
func l4Of(f []byte, at int, udp bool) []byte {
	if udp {
		return f[at-6:]
	}
	return f[at-16:]
}

func TestCompleteL4Checksum(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		for _, udp := range []bool{false, true} {
			for _, vlan := range []bool{false, true} {
				for _, n := range []int{0, 1, 2, 3, 17, 1400, 1401} {
					payload := make([]byte, n)
					for i := range payload {
						payload[i] = byte(i*7 + 3)
					}
					f, at, pseudo := l4Frame(v6, udp, vlan, payload)
					want := ^refSum(pseudo, l4Of(f, at, udp))
					if udp && want == 0 {
						want = 0xffff
					}

					// Partial, as an offloading sender leaves it: the
					// folded pseudo-header sum, not complemented.
					binary.BigEndian.PutUint16(f[at:], refSum(pseudo))
					if !completeL4Checksum(f) {
						t.Errorf("v6=%v udp=%v vlan=%v len %d: a partial checksum not changed", v6, udp, vlan, n)
					}
					if got := binary.BigEndian.Uint16(f[at:]); got != want {
						t.Errorf("v6=%v udp=%v vlan=%v len %d: checksum %#04x, want %#04x", v6, udp, vlan, n, got, want)
					}
					// Complete: stays as it is.
					before := bytes.Clone(f)
					if completeL4Checksum(f) || !bytes.Equal(f, before) {
						t.Errorf("v6=%v udp=%v vlan=%v len %d: a correct checksum changed", v6, udp, vlan, n)
					}
					if udp {
						// Bytes inside the IP packet beyond UDP's
						// length are not the datagram's.
						long := append(bytes.Clone(f), 0xde, 0xad, 0xbe, 0xef)
						ipLen := ethHeaderLen + 2
						if vlan {
							ipLen += 4
						}
						if v6 {
							ipLen += 2
						}
						binary.BigEndian.PutUint16(long[ipLen:], binary.BigEndian.Uint16(long[ipLen:])+4)
						if completeL4Checksum(long) {
							t.Errorf("v6=%v vlan=%v len %d: bytes beyond UDP's length were summed", v6, vlan, n)
						}
					}
					// Ethernet padding after the IP packet is not summed.
					padded := append(bytes.Clone(f), 0xde, 0xad, 0xbe, 0xef)
					if completeL4Checksum(padded) {
						t.Errorf("v6=%v udp=%v vlan=%v len %d: the padding was summed", v6, udp, vlan, n)
					}
				}
			}
		}
	}
}

// A UDP checksum that computes to zero is sent as 0xffff; a zero in the
// field means the sender sent none (IPv4), and stays.
func TestCompleteL4ChecksumUDPZero(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		f, at, pseudo := l4Frame(v6, true, false, make([]byte, 10))
		// Make the last payload word cancel everything else: the sum is
		// then 0xffff and its complement zero.
		binary.BigEndian.PutUint16(f[len(f)-2:], ^refSum(pseudo, l4Of(f, at, true)))
		if s := refSum(pseudo, l4Of(f, at, true)); s != 0xffff {
			t.Fatalf("setup: sum %#04x", s)
		}
		if completeL4Checksum(f) {
			t.Errorf("v6=%v: a UDP checksum of zero (none) was changed", v6)
		}
		binary.BigEndian.PutUint16(f[at:], 0x1234)
		completeL4Checksum(f)
		if got := binary.BigEndian.Uint16(f[at:]); got != 0xffff {
			t.Errorf("v6=%v: a UDP checksum computing to zero is %#04x, want 0xffff", v6, got)
		}
	}
}

func TestCompleteL4ChecksumLeavesAlone(t *testing.T) {
	tcp4 := func() []byte { f, _, _ := l4Frame(false, false, false, []byte("hello")); return f }
	cases := map[string][]byte{
		"empty":     nil,
		"short eth": make([]byte, 10),
		"arp":       append(make([]byte, 12), 0x08, 0x06, 0, 1),
		"truncated": tcp4()[:40],
	}
	f := tcp4()
	f[ethHeaderLen+6] |= 0x20 // more fragments
	cases["first fragment"] = f
	f = tcp4()
	f[ethHeaderLen+7] = 1 // fragment offset 8
	cases["later fragment"] = f
	f = tcp4()
	f[ethHeaderLen+9] = 1 // ICMP
	cases["icmp"] = f
	f = tcp4()
	f[ethHeaderLen] = 0x44 // IHL 16
	cases["bad ihl"] = f
	f, _, _ = l4Frame(true, true, false, nil)
	f[ethHeaderLen+6] = 0 // hop-by-hop options first
	cases["v6 extension header"] = f
	for name, f := range cases {
		before := bytes.Clone(f)
		if completeL4Checksum(f) || !bytes.Equal(f, before) {
			t.Errorf("%s: changed", name)
		}
	}
}

func TestCompleteL4ChecksumAllocs(t *testing.T) {
	f, at, _ := l4Frame(false, false, false, make([]byte, 1460))
	if n := testing.AllocsPerRun(100, func() {
		f[at] ^= 1
		completeL4Checksum(f)
	}); n != 0 {
		t.Errorf("%v allocations per frame, want 0", n)
	}
}

func BenchmarkCompleteL4Checksum(b *testing.B) {
	for _, size := range []int{64, 1514} {
		f, _, _ := l4Frame(false, false, false, make([]byte, size-54))
		b.Run(map[int]string{64: "64B", 1514: "1514B"}[size], func(b *testing.B) {
			b.SetBytes(int64(len(f)))
			b.ReportAllocs()
			for b.Loop() {
				completeL4Checksum(f)
			}
		})
	}
}

// csum=auto completes checksums on a veth and nowhere else; fix and off
// say so whatever the interface.
func TestCsumPolicy(t *testing.T) {
	for _, tc := range []struct {
		c    portspec.NICCsum
		want bool
	}{{portspec.CsumFix, true}, {portspec.CsumOff, false}, {portspec.CsumAuto, false}} {
		if got, why := csumPolicy(tc.c, "lo"); got != tc.want || why == "" {
			t.Errorf("csum=%q on lo: %v (%s), want %v", tc.c, got, why, tc.want)
		}
	}
	require.Root(t)
	v := netns.NewVeth(t, netns.VethOptions{})
	if got, why := csumPolicy(portspec.CsumAuto, v.Outer); !got {
		t.Errorf("csum=auto on a veth: off (%s)", why)
	}
}

// TestNICPartialChecksums sends TCP between two namespaces whose veths
// keep their checksum offloads at the defaults, across two NIC ports:
// each side's segments leave with partial checksums, and the receiving
// kernel checks them. With csum=auto (a veth: completed) an echoed
// stream comes back whole; with csum=off the connection never opens.
func TestNICPartialChecksums(t *testing.T) {
	require.Root(t)
	// csum=auto on a veth must complete them, csum=off must not.
	for csum, ok := range map[string]bool{"auto": true, "off": false} {
		t.Run("csum="+csum, func(t *testing.T) {
			spec := portspec.CsumAuto
			if !ok {
				spec = portspec.CsumOff
			}
			v1 := netns.NewVeth(t, netns.VethOptions{InnerAddr: "10.89.0.1/24", KeepOffload: true})
			v2 := netns.NewVeth(t, netns.VethOptions{InnerAddr: "10.89.0.2/24", KeepOffload: true})
			s := startTestSwitch(t, Config{Workers: 1})
			for _, v := range []*netns.Veth{v1, v2} {
				if err := s.AddNIC(portspec.NIC{Name: v.Outer, Ifname: v.Outer, Mode: portspec.ModeCopy, Csum: spec}); err != nil {
					t.Fatal(err)
				}
			}
			t.Cleanup(s.removeAll)

			var ln net.Listener
			if err := v2.NS.Do(func() (err error) { ln, err = net.Listen("tcp4", "10.89.0.2:7001"); return }); err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			go func() {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				defer c.Close()
				// Not io.Copy(c, c): TCP to TCP splices through a pooled
				// pipe whose fds close later, under other tests' fd counts.
				_, _ = io.CopyBuffer(struct{ io.Writer }{c}, struct{ io.Reader }{c}, make([]byte, 32<<10))
			}()

			payload := make([]byte, 256<<10)
			rand.Read(payload)
			var back []byte
			err := v1.NS.Do(func() error {
				c, err := net.DialTimeout("tcp4", "10.89.0.2:7001", 3*time.Second)
				if err != nil {
					return err
				}
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(20 * time.Second))
				go func() {
					_, _ = c.Write(payload)
					_ = c.(*net.TCPConn).CloseWrite()
				}()
				back, err = io.ReadAll(c)
				return err
			})
			var fixed uint64
			for _, p := range s.Stats() {
				fixed += p.Kernel[csumCompletedKey]
			}
			if !ok {
				if err == nil {
					t.Errorf("TCP crossed with partial checksums left as they were (csum=off): got %d bytes back", len(back))
				}
				if fixed != 0 {
					t.Errorf("csum=off completed %d checksums", fixed)
				}
				return
			}
			if err != nil || !bytes.Equal(back, payload) {
				t.Fatalf("echo through the switch: %v, %d of %d bytes back (equal: %v); stats %+v", err, len(back), len(payload), bytes.Equal(back, payload), s.Stats())
			}
			if fixed == 0 {
				t.Errorf("the streams crossed but no checksum was completed: %+v", s.Stats())
			}
			for _, p := range s.Ports() {
				if !bytes.Contains([]byte(p.Detail), []byte("csum=fix")) {
					t.Errorf("port %s: detail %q, want csum=fix", p.Name, p.Detail)
				}
			}
		})
	}
}
