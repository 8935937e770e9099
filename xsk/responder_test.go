package xsk

import (
	"bytes"
	"encoding/binary"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/xvswitch/xvswitch/test/netns"
	"github.com/xvswitch/xvswitch/test/require"
)

// responder answers ARP requests and ICMP echo requests for one IPv4
// address, as a host on the AF_XDP socket would.
type responder struct {
	mac net.HardwareAddr
	ip  [4]byte

	arpReplies, echoReplies, ignored uint64
}

func checksum(b []byte) uint16 {
	var sum uint32
	for len(b) >= 2 {
		sum += uint32(binary.BigEndian.Uint16(b))
		b = b[2:]
	}
	if len(b) == 1 {
		sum += uint32(b[0]) << 8
	}
	for sum>>16 != 0 {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}

// reply writes the answer to frame into out and returns its length, or 0.
func (r *responder) reply(frame, out []byte) int {
	if len(frame) < 14 {
		return 0
	}
	switch binary.BigEndian.Uint16(frame[12:14]) {
	case 0x0806: // ARP
		a := frame[14:]
		if len(a) < 28 || binary.BigEndian.Uint16(a[6:8]) != 1 || !bytes.Equal(a[24:28], r.ip[:]) {
			return 0
		}
		n := copy(out, frame[:42])
		copy(out[0:6], frame[6:12]) // to the asker
		copy(out[6:12], r.mac)
		o := out[14:]
		binary.BigEndian.PutUint16(o[6:8], 2) // reply
		copy(o[18:24], a[8:14])               // target hw = sender hw
		copy(o[24:28], a[14:18])              // target ip = sender ip
		copy(o[8:14], r.mac)                  // sender hw = us
		copy(o[14:18], r.ip[:])               // sender ip = us
		for ; n < 60; n++ {
			out[n] = 0 // pad to the Ethernet minimum
		}
		r.arpReplies++
		return n
	case 0x0800: // IPv4
		ip := frame[14:]
		if len(ip) < 20 || ip[0]>>4 != 4 || ip[9] != 1 || !bytes.Equal(ip[16:20], r.ip[:]) {
			return 0
		}
		ihl := int(ip[0]&0xf) * 4
		total := int(binary.BigEndian.Uint16(ip[2:4]))
		if ihl < 20 || total > len(ip) || total < ihl+8 || ip[ihl] != 8 {
			return 0
		}
		n := copy(out, frame[:14+total])
		copy(out[0:6], frame[6:12])
		copy(out[6:12], r.mac)
		o := out[14:]
		copy(o[12:16], ip[16:20]) // src = us
		copy(o[16:20], ip[12:16]) // dst = asker
		o[8] = 64
		o[10], o[11] = 0, 0
		binary.BigEndian.PutUint16(o[10:12], checksum(o[:ihl]))
		icmp := o[ihl:total]
		icmp[0] = 0 // echo reply
		icmp[2], icmp[3] = 0, 0
		binary.BigEndian.PutUint16(icmp[2:4], checksum(icmp))
		r.echoReplies++
		return n
	}
	return 0
}

// serve runs the responder on s until stop is set: receive a burst, answer
// what it can through AF_XDP TX (one kick per burst), release, reap.
func (r *responder) serve(t testing.TB, s *Socket, stop *atomic.Bool) {
	var descs [MaxBurst]Desc
	for !stop.Load() {
		if _, err := s.Complete(); err != nil {
			t.Errorf("complete: %v", err)
			return
		}
		n := s.Receive(descs[:])
		if n == 0 {
			if _, err := s.Wait(20 * time.Millisecond); err != nil {
				t.Errorf("wait: %v", err)
				return
			}
			continue
		}
		k := s.TXReserve(n)
		j := 0
		for i := range n {
			if j >= k {
				break
			}
			if m := r.reply(s.Frame(descs[i]), s.TXBuffer(j)); m > 0 {
				s.TXSetLen(j, m)
				j++
			} else {
				r.ignored++
			}
		}
		if _, err := s.TXSubmit(j); err != nil {
			t.Errorf("submit: %v", err)
			return
		}
		s.Release(descs[:n])
	}
}

func ifindex(t testing.TB, name string) int {
	t.Helper()
	ifi, err := net.InterfaceByName(name)
	if err != nil {
		t.Fatal(err)
	}
	return ifi.Index
}

// TestPingThroughAFXDP: a host in a namespace ARPs for and pings an
// address that only the responder on the AF_XDP socket (bound to the veth's
// outer end) serves; the replies can only come back through AF_XDP TX.
func TestPingThroughAFXDP(t *testing.T) {
	require.Root(t)
	require.Commands(t, "ip", "ping")
	v := netns.NewVeth(t, netns.VethOptions{InnerAddr: "10.77.0.1/24"})
	x := newXDPRedirect(t, 1)
	x.attach(t, v.Outer)

	u, err := NewUMEM(UMEMConfig{FrameSize: 2048, NumFrames: 1024})
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	s, err := u.Bind(ifindex(t, v.Outer), 0, SocketConfig{RXSize: 256, TXSize: 256, FillSize: 256, CompletionSize: 256})
	if err != nil {
		t.Fatal(err)
	}
	if s.ZeroCopy() {
		t.Fatal("veth reported zero-copy; it only supports copy mode")
	}
	if s.TXBudget() != 256 {
		t.Logf("XDP_MAX_TX_SKB_BUDGET not in force (kernel default used)")
	}
	x.insert(t, 0, s)

	r := &responder{mac: net.HardwareAddr{0x02, 0x58, 0x56, 0x53, 0x00, 0x02}, ip: [4]byte{10, 77, 0, 2}}
	var stop atomic.Bool
	done := make(chan struct{})
	go func() { defer close(done); r.serve(t, s, &stop) }()

	out, pingErr := v.NS.Exec("ping", "-c", "3", "-i", "0.2", "-W", "2", "10.77.0.2").CombinedOutput()
	neigh := v.NS.MustRun(t, "ip", "neigh", "show", "10.77.0.2", "dev", v.Inner)
	stop.Store(true)
	<-done

	if pingErr != nil || !strings.Contains(string(out), " 0% packet loss") {
		t.Fatalf("ping through AF_XDP failed: %v\n%s", pingErr, out)
	}
	if !strings.Contains(neigh, r.mac.String()) {
		t.Fatalf("namespace neighbour table did not learn %s: %q", r.mac, neigh)
	}
	if r.arpReplies < 1 || r.echoReplies < 3 {
		t.Fatalf("responder sent %d ARP and %d echo replies", r.arpReplies, r.echoReplies)
	}
	c := s.Counters()
	if c.TXSubmitted != r.arpReplies+r.echoReplies {
		t.Fatalf("TX submitted %d, responder built %d", c.TXSubmitted, r.arpReplies+r.echoReplies)
	}
	if c.RXFrames < r.arpReplies+r.echoReplies || c.RXBadDescs != 0 || c.FreeRejected != 0 || c.KickErrors != 0 {
		t.Fatalf("counters: %+v", c)
	}
	// Reap the last completions; every frame must be back in the stash.
	for i := 0; i < 100 && s.TXOutstanding() > 0; i++ {
		if _, err := s.Complete(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond)
	}
	if s.TXOutstanding() != 0 {
		t.Fatalf("%d TX frames never completed", s.TXOutstanding())
	}
	st, err := s.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if st.TXInvalidDescs != 0 || st.RXInvalidDescs != 0 {
		t.Fatalf("kernel stats: %+v", st)
	}
	t.Logf("ARP replies %d, echo replies %d, ignored %d; counters %+v; kernel %+v",
		r.arpReplies, r.echoReplies, r.ignored, c, st)
}

func interfaceIndex(name string) (int, error) {
	ifi, err := net.InterfaceByName(name)
	if err != nil {
		return 0, err
	}
	return ifi.Index, nil
}
