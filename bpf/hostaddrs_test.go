package bpf

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/xvswitch/xvswitch/test/netns"
)

func ips(ss ...string) []net.IP {
	var out []net.IP
	for _, s := range ss {
		ip := net.ParseIP(s)
		if ip == nil {
			panic(s)
		}
		out = append(out, ip)
	}
	return out
}

func hostAddrs(ifindex int, ips ...net.IP) []hostAddr {
	var out []hostAddr
	for _, ip := range ips {
		out = append(out, hostAddr{ip: ip, ifindex: ifindex})
	}
	return out
}

func TestHostKeys(t *testing.T) {
	// Both forms of an IPv4 address give the same key; duplicates merge.
	v4, v6, err := hostKeys(hostAddrs(7, net.ParseIP("10.1.2.3"), net.ParseIP("10.1.2.3").To4(), net.ParseIP("fe80::1"), net.ParseIP("FE80::1")))
	if err != nil {
		t.Fatal(err)
	}
	if ifx, ok := v4[steerXvsIp4{Addr: [4]uint8{10, 1, 2, 3}}]; !ok || ifx != 7 || len(v4) != 1 {
		t.Errorf("IPv4 entries %v", v4)
	}
	if ifx, ok := v6[steerXvsIp6{Addr: [16]uint8{0xfe, 0x80, 15: 1}}]; !ok || ifx != 7 || len(v6) != 1 {
		t.Errorf("IPv6 entries %v", v6)
	}
	for _, bad := range []net.IP{nil, {1, 2, 3}, net.ParseIP("0.0.0.0"), net.ParseIP("::"), net.ParseIP("224.0.0.1"), net.ParseIP("ff02::1")} {
		if _, _, err := hostKeys(hostAddrs(1, bad)); !errors.Is(err, ErrHostAddr) {
			t.Errorf("hostKeys(%v): %v, want ErrHostAddr", bad, err)
		}
	}
	many := make([]net.IP, MaxHostAddrs+1)
	for i := range many {
		many[i] = net.IPv4(10, 9, byte(i>>8), byte(i))
	}
	if _, _, err := hostKeys(hostAddrs(1, many...)); !errors.Is(err, ErrHostAddrMapFull) {
		t.Errorf("%d IPv4 addresses: %v, want ErrHostAddrMapFull", len(many), err)
	}
	if _, _, err := hostKeys(hostAddrs(1, many[:MaxHostAddrs]...)); err != nil {
		t.Errorf("%d IPv4 addresses: %v", MaxHostAddrs, err)
	}
}

// SetHostAddrs replaces the whole set; HostAddrs reads it back sorted.
func TestSetHostAddrs(t *testing.T) {
	t.Parallel()
	l := newLab(t, Policy{Mode: ModeMAC, Broadcast: true, Multicast: true})
	check := func(want ...string) {
		t.Helper()
		got, err := l.S.HostAddrs()
		if err != nil {
			t.Fatal(err)
		}
		var gs []string
		for _, ip := range got {
			gs = append(gs, ip.String())
			if ip.To4() != nil && len(ip) != net.IPv4len {
				t.Errorf("IPv4 %s read back in %d bytes", ip, len(ip))
			}
		}
		if fmt.Sprint(gs) != fmt.Sprint(want) {
			t.Fatalf("HostAddrs() = %v, want %v", gs, want)
		}
	}
	check()
	if err := l.S.SetHostAddrs(ips("fd00::1", "10.0.0.2", "10.0.0.1", "fe80::1")); err != nil {
		t.Fatal(err)
	}
	check("10.0.0.1", "10.0.0.2", "fd00::1", "fe80::1")
	if err := l.S.SetHostAddrs(ips("10.0.0.2", "fd00::2")); err != nil {
		t.Fatal(err)
	}
	check("10.0.0.2", "fd00::2")
	// A bad set changes nothing.
	if err := l.S.SetHostAddrs(ips("10.0.0.3", "ff02::1")); !errors.Is(err, ErrHostAddr) {
		t.Fatalf("SetHostAddrs with a multicast address: %v, want ErrHostAddr", err)
	}
	check("10.0.0.2", "fd00::2")
	if err := l.S.SetHostAddrs(nil); err != nil {
		t.Fatal(err)
	}
	check()
	if err := l.S.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.S.SetHostAddrs(ips("10.0.0.1")); !errors.Is(err, ErrClosed) {
		t.Errorf("SetHostAddrs after Close: %v, want ErrClosed", err)
	}
	if _, err := l.S.HostAddrs(); !errors.Is(err, ErrClosed) {
		t.Errorf("HostAddrs after Close: %v, want ErrClosed", err)
	}
}

// One tracker at a time; it ends with its context (and may then be started
// again) or with Close, which waits for it.
func TestTrackHostAddrsLifecycle(t *testing.T) {
	t.Parallel()
	l := newLab(t, Policy{Mode: ModeMAC, Broadcast: true, Multicast: true})
	if err := l.S.SetHostAddrs(ips("192.0.2.1")); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := l.S.TrackHostAddrs(ctx); err != nil {
		t.Fatal(err)
	}
	// The interface's addresses replaced the set.
	addrs, err := l.S.HostAddrs()
	if err != nil {
		t.Fatal(err)
	}
	if hasIP(addrs, "192.0.2.1") || !hasIP(addrs, l.OuterIP) {
		t.Fatalf("after TrackHostAddrs: %v", addrs)
	}
	if err := l.S.TrackHostAddrs(context.Background()); !errors.Is(err, ErrTracking) {
		t.Fatalf("second TrackHostAddrs: %v, want ErrTracking", err)
	}
	l.S.mu.Lock()
	tr := l.S.tracker
	l.S.mu.Unlock()
	cancel()
	select {
	case <-tr.done:
	case <-time.After(10 * time.Second): // bounds a hang only
		t.Fatal("tracker did not end with its context")
	}
	if err := l.S.TrackHostAddrs(t.Context()); err != nil {
		t.Fatalf("TrackHostAddrs after the first ended: %v", err)
	}
	l.S.mu.Lock()
	tr = l.S.tracker
	l.S.mu.Unlock()
	if err := l.S.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-tr.done: // Close waited for it
	default:
		t.Fatal("Close returned with the tracker still running")
	}
	if err := l.S.TrackHostAddrs(t.Context()); !errors.Is(err, ErrClosed) {
		t.Fatalf("TrackHostAddrs after Close: %v, want ErrClosed", err)
	}
}

// Which interfaces' addresses are the host's on a NIC: its own, those of
// devices stacked on it or on its bridge/bond, and the bridge's or bond's;
// never a master's other ports, nor a device whose parent index names an
// interface of another namespace.
func TestStackedLinks(t *testing.T) {
	const nic = 10
	links := []linkInfo{
		{index: 1, kind: "device"},                                    // lo
		{index: nic, kind: "veth", master: 20},                        // the NIC, a bridge port
		{index: 11, kind: "vlan", parent: nic},                        // nic.100
		{index: 12, kind: "macvlan", parent: nic},                     // a macvlan on the NIC
		{index: 13, kind: "vlan", parent: 11},                         // QinQ on nic.100
		{index: 14, kind: "veth", parent: nic},                        // a veth whose peer has the NIC's index elsewhere...
		{index: 15, kind: "vlan", parent: nic, parentElsewhere: true}, // ...a VLAN on an interface of another namespace
		{index: 20, kind: "bridge"},                                   // the NIC's bridge
		{index: 21, kind: "tuntap", master: 20},                       // a VM's tap on the bridge
		{index: 22, kind: "vlan", parent: 20},                         // br.200
		{index: 23, kind: "vlan", parent: 21},                         // a VLAN on the tap
		{index: 30, kind: "vrf"},
		{index: 111, kind: "ipvlan", parent: 12}, // an ipvlan on the macvlan
		{index: 40, kind: "device", master: 30},  // another NIC in a VRF
	}
	got := stackedLinks(links, nic)
	want := map[int]bool{nic: true, 11: true, 12: true, 13: true, 20: true, 22: true, 111: true}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("stackedLinks = %v, want %v", got, want)
	}
	// A NIC in a VRF: the VRF device is not a master whose addresses count.
	links[1].master = 30
	got = stackedLinks(links, nic)
	if got[30] || got[20] || !got[11] {
		t.Fatalf("NIC in a VRF: %v", got)
	}
}

func TestCapPerFamily(t *testing.T) {
	var in []hostAddr
	for i := range 5 {
		in = append(in, hostAddr{ip: net.IPv4(10, 0, 0, byte(i)).To4()})
	}
	for i := range 4 {
		in = append(in, hostAddr{ip: net.ParseIP(fmt.Sprintf("fd00::%d", i))})
	}
	out, dropped := capPerFamily(in, 3)
	if len(out) != 6 || dropped != 3 || !out[2].ip.Equal(net.IPv4(10, 0, 0, 2)) || !out[5].ip.Equal(net.ParseIP("fd00::2")) {
		t.Fatalf("capPerFamily: %v, %d dropped", out, dropped)
	}
}

// A broken rtnetlink subscription (as after ENOBUFS) is made again, and
// the re-read catches what changed meanwhile.
func TestTrackHostAddrsResubscribes(t *testing.T) {
	t.Parallel()
	l := newLab(t, Policy{Mode: ModeMAC, Broadcast: true, Multicast: true})
	subs := make(chan *netSub, 4)
	l.S.onSubscribe = func(n *netSub) { subs <- n }
	if err := l.S.TrackHostAddrs(t.Context()); err != nil {
		t.Fatal(err)
	}
	first := <-subs
	first.close() // the library's receive fails and closes the channels
	extra := l.Net + ".78"
	netns.MustRun(t, "ip", "addr", "add", extra+"/32", "dev", l.Outer)
	select {
	case <-subs:
	case <-time.After(10 * time.Second): // bounds a hang only
		t.Fatal("the tracker never subscribed again")
	}
	awaitHostAddrs(t, l.S, "gained "+extra+" (changed while unsubscribed, or after)", func(a []net.IP) bool { return hasIP(a, extra) })
	// The new subscription works.
	netns.MustRun(t, "ip", "addr", "del", extra+"/32", "dev", l.Outer)
	awaitHostAddrs(t, l.S, "lost "+extra, func(a []net.IP) bool { return !hasIP(a, extra) })
}
