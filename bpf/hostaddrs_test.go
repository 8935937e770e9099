package bpf

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"
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

func TestHostKeys(t *testing.T) {
	// Both forms of an IPv4 address give the same key; duplicates merge.
	v4, v6, err := hostKeys([]net.IP{net.ParseIP("10.1.2.3"), net.ParseIP("10.1.2.3").To4(), net.ParseIP("fe80::1"), net.ParseIP("FE80::1")})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := v4[steerXvsIp4{Addr: [4]uint8{10, 1, 2, 3}}]; !ok || len(v4) != 1 {
		t.Errorf("IPv4 keys %v", v4)
	}
	if _, ok := v6[steerXvsIp6{Addr: [16]uint8{0xfe, 0x80, 15: 1}}]; !ok || len(v6) != 1 {
		t.Errorf("IPv6 keys %v", v6)
	}
	for _, bad := range []net.IP{nil, {1, 2, 3}, net.ParseIP("0.0.0.0"), net.ParseIP("::"), net.ParseIP("224.0.0.1"), net.ParseIP("ff02::1")} {
		if _, _, err := hostKeys([]net.IP{bad}); !errors.Is(err, ErrHostAddr) {
			t.Errorf("hostKeys(%v): %v, want ErrHostAddr", bad, err)
		}
	}
	many := make([]net.IP, MaxHostAddrs+1)
	for i := range many {
		many[i] = net.IPv4(10, 9, byte(i>>8), byte(i))
	}
	if _, _, err := hostKeys(many); !errors.Is(err, ErrHostAddrMapFull) {
		t.Errorf("%d IPv4 addresses: %v, want ErrHostAddrMapFull", len(many), err)
	}
	if _, _, err := hostKeys(many[:MaxHostAddrs]); err != nil {
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
