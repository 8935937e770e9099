package vswitch

import (
	"testing"

	"github.com/xvswitch/xvswitch/portspec"
	"github.com/xvswitch/xvswitch/test/netns"
	"github.com/xvswitch/xvswitch/test/require"
)

// goneNICPort is a NIC port whose interface is gone: queues, no sockets.
func goneNICPort(t *testing.T, queues int) *nicPort {
	t.Helper()
	p := &nicPort{spec: portspec.NIC{Name: "nic0", Ifname: "xvsnosuchif0"}, retired: map[string]uint64{}, macs: map[uint64]bool{}}
	for range queues {
		q, err := newNICQueue(&p.link)
		if err != nil {
			t.Fatal(err)
		}
		p.queues = append(p.queues, q)
	}
	g, err := newNICGroupQueue(&p.link)
	if err != nil {
		t.Fatal(err)
	}
	p.groups = g
	return p
}

// A NIC port whose interface is gone stays on the switch: its queues are
// polled (nothing comes) and sent to (port_down), the ledger balances, and
// `show ports` says "gone". Needs no root: no socket is ever made.
func TestNICPortGone(t *testing.T) {
	s := startTestSwitch(t, Config{Workers: 1})
	nic := goneNICPort(t, 2)
	a := newFakePort()
	if err := s.AddPort("nic0", nic, 0); err != nil {
		t.Fatal(err)
	}
	if err := s.AddPort("a", a, 0); err != nil {
		t.Fatal(err)
	}
	a.put(ethFrame(bcast, 0x0200_0000_0001, "to a NIC that is gone"), ethFrame(0x0200_0000_0009, 0x0200_0000_0001, "unknown unicast"))
	waitFor(t, "port_down drops", func() bool { return s.Stats()[0].Drops["port_down"] == 2 })
	balance(t, s)
	ports := s.Ports()
	if ports[0].State != "gone" || ports[0].Queues != 2 {
		t.Errorf("show ports: %+v", ports[0])
	}
	k := s.Stats()[0].Kernel
	for _, c := range []string{"link_down_events", "nic_gone_events", "nic_reattached", "mtu_changes",
		"xdp_detached_events", "xdp_reattached", "xdp_replaced_events", "recovery_errors"} {
		if n, ok := k[c]; !ok || n != 0 {
			t.Errorf("kernel counter %s: %d %v, want a 0 (a series from the start)", c, n, ok)
		}
	}
	if err := s.DelPort("nic0"); err != nil {
		t.Fatal(err)
	}
}

// Dropping a burst to a port that is down costs no allocation, nor does
// sending one on a bound socket.
func TestNICTransmitAllocs(t *testing.T) {
	var b Burst
	frame := ethFrame(0x0200_0000_0002, 0x0200_0000_0001, "0123456789012345678901234567890123456789012345678901")
	for i := range MaxBurst {
		b.SetOne(i, frame)
	}
	all := Mask(1<<MaxBurst - 1)
	check := func(what string, q *nicQueue, want Drop) {
		t.Helper()
		var c Counts
		if n := testing.AllocsPerRun(100, func() { q.Transmit(&b, all, &c) }); n != 0 {
			t.Errorf("%s: %v allocations per burst", what, n)
		}
		if want < NumDrops && c.drops[want] != 101*MaxBurst {
			t.Errorf("%s: %d frames dropped as %s, want %d", what, c.drops[want], want, 101*MaxBurst)
		}
	}
	gone := goneNICPort(t, 1)
	defer gone.Close()
	check("gone", gone.queues[0], DropPortDown)

	require.Root(t)
	v := netns.NewVeth(t, netns.VethOptions{})
	p, err := newNICPort(portspec.NIC{Name: v.Outer, Ifname: v.Outer, Mode: portspec.ModeCopy}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	check("bound", p.queues[0], NumDrops)
	p.link.up.Store(false)
	check("link down", p.queues[0], DropPortDown)
}

// The interface is deleted under a queue before the watcher has seen it
// (here: there is no watcher). The first burst sent to its now unbound
// socket is dropped as port_down, not counted as sent, and the queue lets
// go of the socket: later bursts neither kick a dead socket nor pile up
// in its TX ring, and polling it returns nothing. Closing the port then
// releases everything.
func TestNICTransmitDeadSocket(t *testing.T) {
	require.Root(t)
	v := netns.NewVeth(t, netns.VethOptions{})
	fds := openFDs(t)
	p, err := newNICPort(portspec.NIC{Name: v.Outer, Ifname: v.Outer, Mode: portspec.ModeCopy}, nil)
	if err != nil {
		t.Fatal(err)
	}
	q := p.queues[0]
	v.Delete(t)
	var b Burst
	frame := ethFrame(0x0200_0000_0002, 0x0200_0000_0001, "to a deleted interface")
	for i := range MaxBurst {
		b.SetOne(i, frame)
	}
	var c Counts
	for range 3 {
		q.Transmit(&b, Mask(1<<MaxBurst-1), &c)
	}
	if c.packets != 0 || c.drops[DropPortDown] != 3*MaxBurst {
		t.Errorf("sent %d, port_down %d, want 0 and %d: %+v", c.packets, c.drops[DropPortDown], 3*MaxBurst, c)
	}
	if q.sock.Load() != nil {
		t.Error("the queue still holds the dead socket")
	}
	if n, err := q.Receive(&b, &c); n != 0 || err != nil {
		t.Errorf("Receive on the dead queue: %d %v", n, err)
	}
	if kicks := p.bound.socks[0].Counters().Kicks; kicks != 1 {
		t.Errorf("%d kicks of the dead socket, want the one that found it dead", kicks)
	}
	if err := p.Close(); err != nil {
		t.Logf("Close after the interface went: %v", err)
	}
	checkFDs(t, fds, "across the port's life")
}
