package vswitch

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"net"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/xvswitch/xvswitch/afpacket"
	"github.com/xvswitch/xvswitch/offload"
	"github.com/xvswitch/xvswitch/portspec"
	"github.com/xvswitch/xvswitch/test/netns"
	"github.com/xvswitch/xvswitch/test/require"
	"github.com/xvswitch/xvswitch/vhost/vhosttest"
)

// TestHostKeepsGroupFrames: with the switch on its NIC, the host still
// gets the group frames a network sends it (a broadcast DHCP reply, an
// IPv6 router advertisement to all nodes, a datagram to a group it
// joined), its sockets receiving each, and every VM gets each too, byte
// for byte, a VLAN-tagged broadcast with its tag. The XDP program passed
// them all (group_passed), the switch took each from AF_PACKET, and the
// counters balance. Neither the host's own multicast (looped back to its
// sockets) nor what the switch sends out on the NIC comes back into the
// switch.
func TestHostKeepsGroupFrames(t *testing.T) {
	require.Root(t)
	var r [3]byte
	_, _ = rand.Read(r[:])
	subnet := fmt.Sprintf("10.%d.%d", 160+int(r[0])%32, r[1])
	peerIP := net.ParseIP(subnet + ".2").To4()
	group := net.IPv4(239, 77, r[1], 1+r[2]%250).To4()
	v := netns.NewVeth(t, netns.VethOptions{OuterAddr: subnet + ".1/24", InnerAddr: subnet + ".2/24"})
	// The peer says nothing but what the test sends; the host has IPv6 on
	// its NIC, as a host on a network with routers does.
	v.NS.MustRun(t, "sysctl", "-q", "-w", "net.ipv6.conf.all.disable_ipv6=1")
	netns.MustRun(t, "sysctl", "-q", "-w", "net.ipv6.conf."+v.Outer+".disable_ipv6=0")
	ifi, err := net.InterfaceByName(v.Outer)
	if err != nil {
		t.Fatal(err)
	}
	peerMAC, _ := net.ParseMAC(netns.MAC(t, v.NS, v.Inner))

	// The host's sockets, bound to the NIC.
	dhcp := hostSocket(t, unix.AF_INET, unix.SOCK_DGRAM, 0, v.Outer)
	if err := unix.Bind(dhcp, &unix.SockaddrInet4{Port: 68}); err != nil {
		t.Fatal(err)
	}
	icmp6 := hostSocket(t, unix.AF_INET6, unix.SOCK_RAW, unix.IPPROTO_ICMPV6, v.Outer)
	joined, err := net.ListenMulticastUDP("udp4", ifi, &net.UDPAddr{IP: group, Port: 5000 + int(r[2])})
	if err != nil {
		t.Fatal(err)
	}
	defer joined.Close()
	groupPort := joined.LocalAddr().(*net.UDPAddr).Port

	s := startTestSwitch(t, Config{Workers: 1})
	a, b := bystanders(t, s)
	if err := s.AddNIC(portspec.NIC{Name: v.Outer, Ifname: v.Outer, Mode: portspec.ModeCopy}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.removeAll)
	const n = 4
	a.fe.PostRx(0, n+1)
	b.fe.PostRx(0, n+1)
	before := portStats(s, v.Outer).Kernel

	bcastMAC := net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
	nonce := make([]byte, 6)
	_, _ = rand.Read(nonce)
	offer := []byte(fmt.Sprintf("a DHCP-style offer %x", nonce))
	toGroup := []byte(fmt.Sprintf("to the group the host joined %x", nonce))
	llPeer := net.ParseIP(fmt.Sprintf("fe80::ff:fe00:%x", r[1]))
	ra := routerAdvert(nonce)
	frames := [][]byte{
		udp4Frame(bcastMAC, peerMAC, peerIP, net.IPv4bcast.To4(), 67, 68, offer),
		icmp6Frame(net.HardwareAddr{0x33, 0x33, 0, 0, 0, 1}, peerMAC, llPeer, net.ParseIP("ff02::1"), ra),
		udp4Frame(net.HardwareAddr{0x01, 0x00, 0x5e, group[1] & 0x7f, group[2], group[3]}, peerMAC, peerIP, group, 4000, groupPort, toGroup),
		vlanTagged(ethFrame(bcast, MACKey(peerMAC), fmt.Sprintf("a broadcast in VLAN 100 %x", nonce)), 100),
	}
	sendFrames(t, v.NS, v.Inner, frames...)

	// The host got each: its DHCP client's port, its ICMPv6 (an RA to
	// all nodes), its group.
	if got := recvMatching(t, dhcp, func(p []byte) bool { return bytes.Equal(p, offer) }); got == nil {
		t.Error("the host's UDP port 68 did not get the broadcast offer")
	}
	if got := recvMatching(t, icmp6, func(p []byte) bool { return bytes.Equal(p, ra) }); got == nil {
		t.Error("the host's ICMPv6 socket did not get the router advertisement")
	}
	if got := recvUDP(t, joined, toGroup); !got {
		t.Error("the host's socket in the group did not get the datagram")
	}
	// And so did each VM, byte for byte, in order.
	for _, g := range []*guest{a, b} {
		got := g.receiveFrom(t, 0, n, MACKey(peerMAC))
		for i := range frames {
			if !bytes.Equal(got[i], frames[i]) {
				t.Errorf("%s: frame %d\n got %x\nwant %x", g.name, i, got[i], frames[i])
			}
		}
	}
	nicRx := func() uint64 { return portStats(s, v.Outer).RxPackets }
	waitFor(t, "the NIC port to count the group frames", func() bool { return nicRx() == n })

	// The host's own multicast on the NIC: its group socket gets its
	// loopback copy, the switch does not.
	own := []byte(fmt.Sprintf("the host's own multicast %x", nonce))
	sendMulticast(t, ifi.Index, group, groupPort, own)
	if !recvUDP(t, joined, own) {
		t.Error("the host's own multicast did not loop back to its socket")
	}
	// A VM's broadcast goes out of the NIC and does not come back in.
	a.fe.Send(0, ethFrame(bcast, a.mac, "a VM's broadcast"))
	b.receiveFrom(t, 0, 1, a.mac)
	waitFor(t, "the VM's broadcast sent on the NIC", func() bool { return portStats(s, v.Outer).TxPackets == 1 })
	time.Sleep(200 * time.Millisecond) // what would come back has had its time
	nic := portStats(s, v.Outer)
	if nic.RxPackets != n || len(nic.Queues) != 2 || nic.Queues[1].RxPackets != n {
		t.Errorf("the NIC port received %d frames (%+v), want the %d group frames on its group queue (1)", nic.RxPackets, nic.Queues, n)
	}
	delta := func(k string) uint64 { return nic.Kernel[k] - before[k] }
	if delta("xdp_group_passed") != n || delta("xdp_redirected") != 0 || delta("xdp_not_owned_passed") != 0 || nic.Kernel["af_packet_dropped"] != 0 {
		t.Errorf("kernel counters from %v to %v: want %d more group_passed and nothing else", before, nic.Kernel, n)
	}
	for _, g := range []*guest{a, b} {
		if rx := portStats(s, g.name).TxPackets; rx != n+uint64(map[bool]int{true: 0, false: 1}[g == a]) {
			t.Errorf("%s: %d frames transmitted to it", g.name, rx)
		}
	}
	balance(t, s)
}

// hostSocket is a socket in the test's namespace bound to ifname, with a
// receive timeout.
func hostSocket(t *testing.T, domain, typ, proto int, ifname string) int {
	t.Helper()
	fd, err := unix.Socket(domain, typ|unix.SOCK_CLOEXEC, proto)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1)
	if err := unix.SetsockoptString(fd, unix.SOL_SOCKET, unix.SO_BINDTODEVICE, ifname); err != nil {
		t.Fatal(err)
	}
	tv := unix.NsecToTimeval(int64(200 * time.Millisecond))
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		t.Fatal(err)
	}
	return fd
}

// recvMatching reads fd until a datagram matches (it is returned) or 5 s
// pass (nil).
func recvMatching(t *testing.T, fd int, match func([]byte) bool) []byte {
	t.Helper()
	buf := make([]byte, 2048)
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		k, _, err := unix.Recvfrom(fd, buf, 0)
		if err == nil && match(buf[:k]) {
			return buf[:k]
		}
	}
	return nil
}

func recvUDP(t *testing.T, c *net.UDPConn, want []byte) bool {
	t.Helper()
	buf := make([]byte, 2048)
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	for {
		k, _, err := c.ReadFromUDP(buf)
		if err != nil {
			return false
		}
		if bytes.Equal(buf[:k], want) {
			return true
		}
	}
}

// sendMulticast sends payload to group:port from the host, out of the
// interface ifindex, looped back to the host's own sockets (the default).
func sendMulticast(t *testing.T, ifindex int, group net.IP, port int, payload []byte) {
	t.Helper()
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if err := unix.SetsockoptIPMreqn(fd, unix.IPPROTO_IP, unix.IP_MULTICAST_IF, &unix.IPMreqn{Ifindex: int32(ifindex)}); err != nil {
		t.Fatal(err)
	}
	to := &unix.SockaddrInet4{Port: port}
	copy(to.Addr[:], group)
	if err := unix.Sendto(fd, payload, 0, to); err != nil {
		t.Fatal(err)
	}
}

// sendFrames sends raw frames out of ifname inside ns.
func sendFrames(t *testing.T, ns *netns.Namespace, ifname string, frames ...[]byte) {
	t.Helper()
	err := ns.Do(func() error {
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
	})
	if err != nil {
		t.Fatal(err)
	}
}

func vlanTagged(f []byte, vid uint16) []byte {
	out := append([]byte{}, f[:12]...)
	out = append(out, 0x81, 0x00, byte(vid>>8), byte(vid))
	return append(out, f[12:]...)
}

// csum16 is the Internet checksum of the concatenated parts.
func csum16(parts ...[]byte) uint16 {
	var all []byte
	for _, p := range parts {
		all = append(all, p...)
	}
	return offload.Checksum(all)
}

// udp4Frame is an IPv4 UDP datagram in an Ethernet frame, checksums
// complete.
func udp4Frame(dst, src net.HardwareAddr, sip, dip net.IP, sport, dport int, payload []byte) []byte {
	udp := make([]byte, 8, 8+len(payload))
	binary.BigEndian.PutUint16(udp[0:], uint16(sport))
	binary.BigEndian.PutUint16(udp[2:], uint16(dport))
	binary.BigEndian.PutUint16(udp[4:], uint16(8+len(payload)))
	udp = append(udp, payload...)
	pseudo := append(append(append([]byte{}, sip...), dip...), 0, unix.IPPROTO_UDP, byte(len(udp)>>8), byte(len(udp)))
	binary.BigEndian.PutUint16(udp[6:], csum16(pseudo, udp))
	ttl := byte(64)
	if dip.IsMulticast() {
		ttl = 1
	}
	ip := []byte{0x45, 0, 0, 0, 0, 1, 0, 0, ttl, unix.IPPROTO_UDP, 0, 0}
	binary.BigEndian.PutUint16(ip[2:], uint16(20+len(udp)))
	ip = append(append(ip, sip...), dip...)
	binary.BigEndian.PutUint16(ip[10:], csum16(ip))
	f := append(append(append([]byte{}, dst...), src...), 0x08, 0x00)
	return append(append(f, ip...), udp...)
}

// routerAdvert is an ICMPv6 Router Advertisement (checksum left zero, for
// icmp6Frame) that makes the host change nothing (router lifetime 0, no
// prefixes), with an experimental option (253, RFC 4727) carrying nonce.
func routerAdvert(nonce []byte) []byte {
	m := []byte{134, 0, 0, 0, 64, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 253, 1}
	return append(m, nonce[:6]...)
}

// icmp6Frame puts ICMPv6 message m (its checksum filled in here) in an
// IPv6 packet with hop limit 255, as neighbour discovery needs.
func icmp6Frame(dst, src net.HardwareAddr, sip, dip net.IP, m []byte) []byte {
	pseudo := append(append(append([]byte{}, sip.To16()...), dip.To16()...), 0, 0, byte(len(m)>>8), byte(len(m)), 0, 0, 0, unix.IPPROTO_ICMPV6)
	m[2], m[3] = 0, 0
	binary.BigEndian.PutUint16(m[2:], csum16(pseudo, m))
	ip := []byte{0x60, 0, 0, 0, byte(len(m) >> 8), byte(len(m)), unix.IPPROTO_ICMPV6, 255}
	ip = append(append(ip, sip.To16()...), dip.To16()...)
	f := append(append(append([]byte{}, dst...), src...), 0x86, 0xdd)
	return append(append(f, ip...), m...)
}

// The group frames' socket follows the interface: deleted and made again
// under its name, the NIC brings the VMs its broadcasts again, through
// the port's same group queue, and its counters add up across the two.
func TestGroupFramesFollowRecreatedNIC(t *testing.T) {
	require.Root(t)
	old := nicCheckInterval
	nicCheckInterval = 100 * time.Millisecond
	t.Cleanup(func() { nicCheckInterval = old })
	opts := netns.VethOptions{}
	v := netns.NewVeth(t, opts)
	quiet := func() {
		for _, c := range []string{"all", "default"} {
			v.NS.MustRun(t, "sysctl", "-q", "-w", "net.ipv6.conf."+c+".disable_ipv6=1")
		}
	}
	quiet()
	s := startTestSwitch(t, Config{Workers: 1})
	a := addGuest(t, s, "vm-a", 0x0252_5400_00e1, vhosttest.Options{Packed: true})
	if err := s.AddNIC(portspec.NIC{Name: v.Outer, Ifname: v.Outer, Mode: portspec.ModeCopy}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.removeAll)
	a.fe.PostRx(0, 4)
	const peer = 0x0200_5e00_0042
	for round := 1; round <= 2; round++ {
		f := ethFrame(bcast, peer, fmt.Sprintf("broadcast, round %d", round))
		sendFrames(t, v.NS, v.Inner, f)
		if got := a.receiveFrom(t, 0, 1, peer); !bytes.Equal(got[0], f) {
			t.Fatalf("round %d: the VM got %x, want %x", round, got[0], f)
		}
		nic := portStats(s, v.Outer)
		if nic.Queues[1].RxPackets != uint64(round) || nic.Kernel["xdp_group_passed"] != uint64(round) {
			t.Errorf("round %d: group queue rx %d, xdp_group_passed %d; want %d each", round, nic.Queues[1].RxPackets, nic.Kernel["xdp_group_passed"], round)
		}
		if round == 2 {
			break
		}
		v.Delete(t)
		waitFor(t, "the port to see its NIC gone", func() bool { return portState(s, v.Outer) == "gone" })
		v.Create(t, opts)
		quiet()
		waitFor(t, "the port to attach to the new NIC", func() bool { return portState(s, v.Outer) == "up" })
	}
	balance(t, s)
}

// A burst of group frames from the ring into the switch and back costs
// no allocation.
func TestNICGroupQueueAllocs(t *testing.T) {
	require.Root(t)
	v := netns.NewVeth(t, netns.VethOptions{})
	v.NS.MustRun(t, "sysctl", "-q", "-w", "net.ipv6.conf.all.disable_ipv6=1")
	ifi, err := net.InterfaceByName(v.Outer)
	if err != nil {
		t.Fatal(err)
	}
	var link nicLink
	link.fixCsum.Store(true) // the checksum pass included
	q, err := newNICGroupQueue(&link)
	if err != nil {
		t.Fatal(err)
	}
	defer q.close()
	sock, err := afpacket.Open(ifi.Index, afpacket.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer sock.Close()
	q.attach(sock)
	defer q.detach(sock)
	const runs = 20
	var frames [][]byte
	for i := 0; i < (runs+1)*MaxBurst; i++ {
		frames = append(frames, ethFrame(bcast, 0x0200_5e00_0042, fmt.Sprintf("frame %d", i)))
	}
	sendFrames(t, v.NS, v.Inner, frames...)
	waitFor(t, "the frames in the ring", func() bool {
		st, _ := sock.Stats()
		return st.Packets >= uint64(len(frames))
	})
	var b Burst
	var c Counts
	got := 0
	allocs := testing.AllocsPerRun(runs, func() {
		n, _ := q.Receive(&b, &c)
		got += n
		_ = q.Release(&b)
	})
	if allocs != 0 {
		t.Errorf("%v allocations per burst", allocs)
	}
	if got != len(frames) {
		t.Errorf("received %d frames of %d", got, len(frames))
	}
}

// The group queue's Waker, the fd a sleeping worker waits on, polls
// readable while group frames wait in the ring and not once they are
// taken, and follows the socket it is attached to.
func TestNICGroupQueueWakes(t *testing.T) {
	require.Root(t)
	v := netns.NewVeth(t, netns.VethOptions{})
	v.NS.MustRun(t, "sysctl", "-q", "-w", "net.ipv6.conf.all.disable_ipv6=1")
	ifi, err := net.InterfaceByName(v.Outer)
	if err != nil {
		t.Fatal(err)
	}
	var link nicLink
	q, err := newNICGroupQueue(&link)
	if err != nil {
		t.Fatal(err)
	}
	defer q.close()
	readable := func(ms int) bool {
		fds := []unix.PollFd{{Fd: int32(q.Waker().FD), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, ms)
		return err == nil && n == 1 && fds[0].Revents&unix.POLLIN != 0
	}
	var b Burst
	var c Counts
	for round := 0; round < 2; round++ { // the second on a new socket
		sock, err := afpacket.Open(ifi.Index, afpacket.Config{})
		if err != nil {
			t.Fatal(err)
		}
		q.attach(sock)
		if readable(0) {
			t.Fatalf("round %d: readable with nothing sent", round)
		}
		sendFrames(t, v.NS, v.Inner, ethFrame(bcast, 0x0200_5e00_0042, "wake up"))
		if !readable(2000) {
			t.Fatalf("round %d: a group frame in the ring, and the waker does not poll readable", round)
		}
		if n, _ := q.Receive(&b, &c); n != 1 {
			t.Fatalf("round %d: received %d", round, n)
		}
		_ = q.Release(&b)
		if readable(0) {
			t.Fatalf("round %d: still readable with the ring emptied", round)
		}
		q.detach(sock)
		sock.Close()
	}
}
