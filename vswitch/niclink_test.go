package vswitch

import (
	"testing"
	"time"

	"github.com/xvswitch/xvswitch/test/netns"
)

// The link of a NIC goes down, by the host's hand (ip link set down) or
// the wire's (the peer goes away: no carrier), and comes back. The port
// says "down" meanwhile and drops what it would send as port_down rather
// than queueing it in a TX ring nobody drains; when the link returns,
// the same sockets carry traffic again.
func TestNICLinkDownUp(t *testing.T) {
	l := newNICLab(t)
	fds := openFDs(t)
	b := l.b.Outer
	for i, down := range []struct {
		what     string
		down, up func()
	}{
		{"admin down",
			func() { netns.MustRun(t, "ip", "link", "set", b, "down") },
			func() { netns.MustRun(t, "ip", "link", "set", b, "up") }},
		{"no carrier",
			func() { l.b.NS.MustRun(t, "ip", "link", "set", l.b.Inner, "down") },
			func() { l.b.NS.MustRun(t, "ip", "link", "set", l.b.Inner, "up") }},
	} {
		before := l.stats(t, b)
		down.down()
		l.waitState(t, b, "down")
		l.pingFails(t, 0, 3)
		after := l.stats(t, b)
		if after.Drops["port_down"] <= before.Drops["port_down"] {
			t.Errorf("%s: nothing counted as port_down: %+v", down.what, after)
		}
		if after.TxPackets != before.TxPackets {
			t.Errorf("%s: %d frames counted as sent on a link that is down", down.what, after.TxPackets-before.TxPackets)
		}
		down.up()
		l.waitState(t, b, "up")
		if !l.ping(t, 0, 5*time.Second) {
			t.Fatalf("%s: A does not reach B after the link came back: %+v", down.what, l.stats(t, b))
		}
		l.wantKernel(t, b, map[string]uint64{"link_down_events": uint64(i + 1)})
	}
	checkPins(t, b)
	balance(t, l.s)
	checkFDs(t, fds, "across link flaps")
	l.closeAndCheck(t)
}

// An MTU change: the port's longest frame follows it, so what no longer
// fits is counted as too_long instead of being handed to the kernel,
// which drops it without a trace (sendto says EBUSY and completes it).
func TestNICMTUChange(t *testing.T) {
	l := newNICLab(t)
	b := l.b.Outer
	const big = 1200 // an ICMP payload that fits 1500 but not 1000
	if !l.ping(t, big, 3*time.Second) {
		t.Fatalf("a %d-byte ping does not cross at MTU 1500", big)
	}
	before := l.stats(t, b)
	netns.MustRun(t, "ip", "link", "set", b, "mtu", "1000")
	waitFor(t, "the port to follow the MTU", func() bool { return l.stats(t, b).Kernel["mtu_changes"] == 1 })
	l.pingFails(t, big, 3)
	after := l.stats(t, b)
	if tooLong := after.Drops["too_long"] - before.Drops["too_long"]; tooLong < 3 {
		t.Errorf("%d frames counted too_long at MTU 1000, want the 3 echo requests: %+v", tooLong, after)
	}
	if !l.ping(t, 0, 3*time.Second) {
		t.Errorf("small frames stopped crossing at MTU 1000")
	}
	netns.MustRun(t, "ip", "link", "set", b, "mtu", "1500")
	waitFor(t, "the port to follow the MTU back", func() bool { return l.stats(t, b).Kernel["mtu_changes"] == 2 })
	if !l.ping(t, big, 3*time.Second) {
		t.Fatalf("a %d-byte ping does not cross after the MTU went back to 1500", big)
	}
	l.waitState(t, b, "up")
	balance(t, l.s)
	l.closeAndCheck(t)
}
