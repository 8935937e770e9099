package afpacket

import (
	"bytes"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/xvswitch/xvswitch/test/netns"
)

// A veth pair: the outer end is the "NIC" the socket is bound to, the
// namespace's end the wire's far side, which sends raw frames.
func wire(t *testing.T) (*netns.Veth, *net.Interface) {
	t.Helper()
	v := netns.NewVeth(t, netns.VethOptions{})
	// No IPv6 chatter from either end: the socket sees the test's frames.
	v.NS.MustRun(t, "sysctl", "-q", "-w", "net.ipv6.conf.all.disable_ipv6=1")
	netns.MustRun(t, "sysctl", "-q", "-w", "net.ipv6.conf."+v.Outer+".disable_ipv6=1")
	ifi, err := net.InterfaceByName(v.Outer)
	if err != nil {
		t.Fatal(err)
	}
	return v, ifi
}

// sendRaw sends frames out of ifname, from inside ns (nil: here).
func sendRaw(t *testing.T, ns *netns.Namespace, ifname string, frames ...[]byte) {
	t.Helper()
	send := func() error {
		ifi, err := net.InterfaceByName(ifname)
		if err != nil {
			return err
		}
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		for _, f := range frames {
			if err := unix.Sendto(fd, f, 0, &unix.SockaddrLinklayer{Ifindex: ifi.Index, Halen: 6}); err != nil {
				return err
			}
		}
		return nil
	}
	var err error
	if ns == nil {
		err = send()
	} else {
		err = ns.Do(send)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// frameTo is a frame to dst from 02:..:src with an experimental EtherType
// (nothing in the host handles it) and a payload that tells frames apart.
func frameTo(dst string, src byte, payload string) []byte {
	m, _ := net.ParseMAC(dst)
	f := append([]byte{}, m...)
	f = append(f, 2, 0, 0, 0, 0x5e, src, 0x88, 0xb5)
	f = append(f, payload...)
	for len(f) < 60 {
		f = append(f, 0)
	}
	return f
}

// tagged is f with an 802.1Q tag of VLAN vid after its MACs.
func tagged(f []byte, vid uint16) []byte {
	out := append([]byte{}, f[:12]...)
	out = append(out, 0x81, 0x00, byte(vid>>8), byte(vid))
	return append(out, f[12:]...)
}

// collect receives until n frames came or a second passed, waiting in
// poll between tries as a sleeping worker does.
func collect(t *testing.T, s *Socket, n int) [][]byte {
	t.Helper()
	var got [][]byte
	var out [32]Frame
	deadline := time.Now().Add(time.Second)
	for len(got) < n && time.Now().Before(deadline) {
		k := s.Receive(out[:])
		for _, f := range out[:k] {
			if f.Truncated() {
				t.Errorf("truncated frame: %d of %d bytes", len(f.Data), f.WireLen)
			}
			got = append(got, append([]byte{}, f.Data...))
		}
		s.Release()
		if k == 0 {
			_, _ = unix.Poll([]unix.PollFd{{Fd: int32(s.FD()), Events: unix.POLLIN}}, 100)
		}
	}
	return got
}

// The socket gets the group frames from the wire, byte for byte (a tag
// put back as it was), in order, and none of: unicast, the host's own
// transmissions.
func TestGroupFramesFromTheWire(t *testing.T) {
	v, ifi := wire(t)
	s, err := Open(ifi.Index, Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	want := [][]byte{
		frameTo("ff:ff:ff:ff:ff:ff", 1, "broadcast"),
		frameTo("33:33:00:00:00:01", 1, "ipv6 all-nodes"),
		frameTo("01:00:5e:01:02:03", 1, "ipv4 group"),
		tagged(frameTo("ff:ff:ff:ff:ff:ff", 1, "broadcast in vlan 100"), 100),
	}
	sendRaw(t, v.NS, v.Inner, frameTo(ifi.HardwareAddr.String(), 1, "unicast to the host"), frameTo("02:00:00:00:00:99", 1, "unicast to another"))
	sendRaw(t, v.NS, v.Inner, want...)
	// The host's own: a broadcast and a multicast it sends on the NIC.
	sendRaw(t, nil, v.Outer, frameTo("ff:ff:ff:ff:ff:ff", 2, "the host's broadcast"), frameTo("01:00:5e:01:02:03", 2, "the host's multicast"))
	got := collect(t, s, len(want)+1) // +1: wait a while for a frame that must not come
	if len(got) != len(want) {
		t.Fatalf("got %d frames, want %d:\n%x", len(got), len(want), got)
	}
	for i := range want {
		if !bytes.Equal(got[i], want[i]) {
			t.Errorf("frame %d:\n got %x\nwant %x", i, got[i], want[i])
		}
	}
	st, err := s.Stats()
	if err != nil || st.Packets != uint64(len(want)) || st.Drops != 0 {
		t.Fatalf("stats %+v, %v; want %d packets, no drops", st, err, len(want))
	}
}

// Frames the ring has no room for are the kernel's drops, counted; the
// counts add up across reads (the kernel zeroes them at each).
func TestRingFullDrops(t *testing.T) {
	v, ifi := wire(t)
	s, err := Open(ifi.Index, Config{Slots: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	slots := len(s.ring.status)
	var frames [][]byte
	for i := 0; i < slots+5; i++ {
		frames = append(frames, frameTo("ff:ff:ff:ff:ff:ff", 1, "frame "+strconv.Itoa(i)))
	}
	sendRaw(t, v.NS, v.Inner, frames...)
	deadline := time.Now().Add(2 * time.Second)
	var st Stats
	for st.Packets < uint64(len(frames)) && time.Now().Before(deadline) {
		if st, err = s.Stats(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if st.Packets != uint64(len(frames)) || st.Drops != 5 {
		t.Fatalf("stats %+v, want %d packets, 5 drops", st, len(frames))
	}
	got := collect(t, s, slots)
	for i := range got {
		if !bytes.Equal(got[i], frames[i]) {
			t.Errorf("frame %d: %x, want %x", i, got[i], frames[i])
		}
	}
	if len(got) != slots {
		t.Fatalf("got %d frames, want the %d that fit", len(got), slots)
	}
	if st2, _ := s.Stats(); st2 != st {
		t.Fatalf("stats went from %+v to %+v with nothing sent", st, st2)
	}
}

// A frame longer than a slot arrives truncated, and says so.
func TestTruncated(t *testing.T) {
	v, ifi := wire(t)
	s, err := Open(ifi.Index, Config{MaxFrame: 100})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	long := frameTo("ff:ff:ff:ff:ff:ff", 1, strings.Repeat("x", 400))
	sendRaw(t, v.NS, v.Inner, long)
	var out [1]Frame
	deadline := time.Now().Add(time.Second)
	for s.Receive(out[:]) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no frame")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if !out[0].Truncated() || out[0].WireLen != len(long) || !bytes.Equal(out[0].Data, long[:len(out[0].Data)]) {
		t.Fatalf("frame of %d bytes, wire %d; want a truncated prefix of %d", len(out[0].Data), out[0].WireLen, len(long))
	}
	s.Release()
}

// AllMulti holds the interface in all-multicast mode while the socket is
// open, and the kernel gives it up when the socket closes.
func TestAllMulti(t *testing.T) {
	v, ifi := wire(t)
	flags := func() uint64 {
		b, err := os.ReadFile("/sys/class/net/" + v.Outer + "/flags")
		if err != nil {
			t.Fatal(err)
		}
		f, _ := strconv.ParseUint(strings.TrimSpace(string(b)), 0, 64)
		return f
	}
	if flags()&unix.IFF_ALLMULTI != 0 {
		t.Fatal("all-multicast before the socket")
	}
	s, err := Open(ifi.Index, Config{AllMulti: true})
	if err != nil {
		t.Fatal(err)
	}
	if flags()&unix.IFF_ALLMULTI == 0 {
		t.Error("not all-multicast with the socket open")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if flags()&unix.IFF_ALLMULTI != 0 {
		t.Error("still all-multicast after the socket closed")
	}
}
