package vswitch

import (
	"fmt"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/xvswitch/xvswitch/ctl"
	"github.com/xvswitch/xvswitch/test/netns"
)

// umemKiB is one queue's UMEM, populated: one left behind shows in RSS.
const umemKiB = 3 * 1024 * 4096 / 1024

// The NIC is deleted and comes back under the same name (a driver
// reload, a re-created virtual device), twice. Meanwhile the port is
// "gone": its sockets, UMEM, program and pins are released, frames to it
// are port_down, and no worker spins on the dead sockets. When the
// interface returns the port attaches to it by itself: program and pins,
// the MAC map, the host's addresses, one socket per queue; it keeps its
// index and counters, and A reaches B again. Nothing leaks across the
// cycles.
func TestNICDeletedAndRecreated(t *testing.T) {
	l := newNICLab(t)
	b := l.b.Outer
	// A VM's configured MAC: a static FDB entry, which the NIC's MAC map
	// must get again.
	const vmMAC = 0x0252_5400_00c1
	if err := l.s.AddPort("vm", newFakePort(), vmMAC); err != nil {
		t.Fatal(err)
	}
	idx := l.s.byName[b].idx
	fds := openFDs(t)
	rss := rssKiB(t)
	aMAC := netns.MAC(t, l.a.NS, l.a.Inner)
	// The far host is the same one when the NIC comes back: A's
	// neighbour entry for it stays right.
	l.bOpts.InnerMAC = netns.MAC(t, l.b.NS, l.b.Inner)
	for cycle := 1; cycle <= 2; cycle++ {
		before := l.stats(t, b)
		l.b.Delete(t)
		l.waitState(t, b, "gone")
		noPins(t, b)
		if n := openFDs(t); n >= fds {
			t.Errorf("cycle %d: %d fds with the NIC gone, %d with it there: its sockets and maps are still open", cycle, n, fds)
		}
		l.pingFails(t, 0, 2)
		if d := l.stats(t, b).Drops["port_down"] - before.Drops["port_down"]; d == 0 {
			t.Errorf("cycle %d: frames to the gone port were not counted as port_down: %+v", cycle, l.stats(t, b))
		}
		// An idle switch whose NIC is gone sleeps: its worker does not
		// spin on the dead sockets.
		cpu := cpuTime(t)
		time.Sleep(500 * time.Millisecond)
		if used := cpuTime(t) - cpu; used > 150*time.Millisecond {
			t.Errorf("cycle %d: %v of CPU in 500 ms with the NIC gone", cycle, used)
		}

		l.b.Create(t, l.bOpts)
		l.waitState(t, b, "up")
		if !l.ping(t, 0, 5*time.Second) {
			t.Fatalf("cycle %d: A does not reach B after the NIC came back: %+v %+v", cycle, l.info(t, b), l.stats(t, b))
		}
		checkPins(t, b)
		st := l.steering(t, b)
		macs, err := st.MACs()
		_, hasA := macs[aMAC]
		if _, hasVM := macs[MACString(vmMAC)]; err != nil || !hasA || !hasVM {
			t.Errorf("cycle %d: MAC map of %s after return: %v %v, want A's %s and the VM's", cycle, b, macs, err, aMAC)
		}
		if !slices.ContainsFunc(l.s.FDB(), func(r ctl.FDBRow) bool { return r.MAC == MACString(vmMAC) && r.Port == "vm" && r.Static }) {
			t.Errorf("cycle %d: the VM's static entry is gone: %+v", cycle, l.s.FDB())
		}
		waitFor(t, "the host's address in the steering maps", func() bool {
			addrs, _ := st.HostAddrs()
			return slices.ContainsFunc(addrs, func(ip net.IP) bool { return ip.Equal(net.ParseIP(l.bHost)) })
		})
		after := l.stats(t, b)
		if after.RxPackets < before.RxPackets || after.TxPackets < before.TxPackets {
			t.Errorf("cycle %d: counters went back: %+v -> %+v", cycle, before, after)
		}
		if k := after.Kernel; k["xdp_redirected"] < before.Kernel["xdp_redirected"] {
			t.Errorf("cycle %d: xdp_redirected went back %d -> %d", cycle, before.Kernel["xdp_redirected"], k["xdp_redirected"])
		}
		l.wantKernel(t, b, map[string]uint64{"nic_gone_events": uint64(cycle), "nic_reattached": uint64(cycle)})
		if got := l.s.byName[b].idx; got != idx {
			t.Errorf("cycle %d: port index %d, was %d", cycle, got, idx)
		}
		checkFDs(t, fds, fmt.Sprintf("in cycle %d", cycle))
	}
	if grown := rssKiB(t) - rss; grown > umemKiB*2/3 {
		t.Errorf("RSS grew by %d KiB over two cycles", grown)
	}
	balance(t, l.s)
	l.closeAndCheck(t)
}
