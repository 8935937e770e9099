package vhost_test

import (
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/xvswitch/xvswitch/test/qemu"
	"github.com/xvswitch/xvswitch/test/require"
	"github.com/xvswitch/xvswitch/vhost"
	"github.com/xvswitch/xvswitch/virtionet"
	"github.com/xvswitch/xvswitch/virtq"
)

// loop joins two devices as a cable would: what A's guest sends is
// delivered to B's guest and the other way round, one copy, queue pair 0.
// When both directions have been idle for a while it arms the guests'
// kicks and sleeps in epoll on the queues' WaitFDs, as the switch's
// workers do; a kick (or a queue state change) wakes it.
type loop struct {
	a, b      atomic.Pointer[vhost.Device]
	stop      chan struct{}
	wg        sync.WaitGroup
	forwarded atomic.Uint64
	sleeps    atomic.Uint64
	errs      atomic.Uint64
}

func startLoop(t *testing.T, a, b *vhost.Device) *loop {
	l := &loop{stop: make(chan struct{})}
	l.a.Store(a)
	l.b.Store(b)
	l.wg.Add(1)
	go l.run()
	t.Cleanup(func() {
		close(l.stop)
		l.wg.Wait()
	})
	return l
}

func (l *loop) run() {
	defer l.wg.Done()
	idle := 0
	for {
		select {
		case <-l.stop:
			return
		default:
		}
		a, b := l.a.Load(), l.b.Load()
		n := l.forward(a, b) + l.forward(b, a)
		if n > 0 {
			idle = 0
			continue
		}
		if idle++; idle < 2000 {
			time.Sleep(10 * time.Microsecond)
			continue
		}
		l.sleep(a, b)
		idle = 0
	}
}

// forward moves one burst from src's guest to dst's guest.
func (l *loop) forward(src, dst *vhost.Device) int {
	tq := src.TxQueue(0)
	a := tq.Begin()
	if a == nil {
		return 0
	}
	defer tq.End()
	n, err := a.Tx.Receive(virtq.MaxBurst)
	if err != nil {
		l.errs.Add(1)
		a.Break(err)
		return 0
	}
	if fr := a.Tx.Frames(); fr.Len() > 0 {
		rq := dst.RxQueue(0)
		if b := rq.Begin(); b != nil {
			if _, err := b.Rx.Deliver(fr); err != nil {
				l.errs.Add(1)
				b.Break(err)
			}
			rq.End()
		}
		l.forwarded.Add(uint64(fr.Len()))
	}
	if err := a.Tx.Complete(); err != nil {
		l.errs.Add(1)
		a.Break(err)
	}
	return n
}

// sleep arms both guests' TX kicks, polls once more, and waits in epoll.
func (l *loop) sleep(a, b *vhost.Device) {
	qs := []*vhost.Queue{a.TxQueue(0), b.TxQueue(0)}
	ep, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return
	}
	defer unix.Close(ep)
	for i, q := range qs {
		ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(i)}
		if unix.EpollCtl(ep, unix.EPOLL_CTL_ADD, q.WaitFD(), &ev) != nil {
			return
		}
		q.Arm()
	}
	defer func() {
		for _, q := range qs {
			q.Disarm()
		}
	}()
	if l.forward(a, b)+l.forward(b, a) > 0 {
		return
	}
	l.sleeps.Add(1)
	var evs [2]unix.EpollEvent
	n, _ := unix.EpollWait(ep, evs[:], 200)
	for i := 0; i < n; i++ {
		qs[evs[i].Fd].Drain()
	}
}

func openServer(t *testing.T, name, sock string, mtu int) *vhost.Device {
	t.Helper()
	return openDevice(t, vhost.Config{Name: name, Path: sock, MTU: mtu})
}

func requireQEMU(t *testing.T) {
	t.Helper()
	require.Root(t)
	require.Commands(t, "qemu-system-x86_64")
	require.Long(t)
}

// TestQEMUGuestPing: a guest's two NICs on two devices joined by the loop
// ping each other (eth1 in its own namespace, so only across the loop),
// with 56-byte and 8000-byte pings at MTU 9000 (mergeable buffers, and
// chains of several descriptors from the guest), on the packed and the
// split ring; the guest reports the ring kind it negotiated.
func TestQEMUGuestPing(t *testing.T) {
	requireQEMU(t)
	for _, packed := range []bool{true, false} {
		t.Run(fmt.Sprintf("packed=%v", packed), func(t *testing.T) {
			dir := t.TempDir()
			s0, s1 := filepath.Join(dir, "a.sock"), filepath.Join(dir, "b.sock")
			a := openServer(t, "vm-a", s0, 9000)
			b := openServer(t, "vm-b", s1, 9000)
			l := startLoop(t, a, b)
			cfg := qemu.GuestConfig{
				NICs: []qemu.GuestNIC{
					{Socket: s0, Packed: packed, MTU: 9000, Addr: "10.77.0.1/24"},
					{Socket: s1, Packed: packed, MTU: 9000, Addr: "10.77.0.2/24", Netns: "far"},
				},
				Commands: []qemu.GuestCommand{
					qemu.GuestPing("ping", "", "10.77.0.2", 5, 56),
					qemu.GuestPing("jumbo", "", "10.77.0.2", 3, 8000),
					qemu.GuestTCP("tcp", "far", "10.77.0.2", "", 5001, 256*1024),
				},
				Timeout: 150 * time.Second,
			}
			run := qemu.StartGuest(t, cfg).Wait()
			run.RequireOK(t, cfg)
			for i := 0; i < 2; i++ {
				if got := run.HasFeature(i, qemu.VirtioFRingPacked); got != packed {
					t.Errorf("eth%d negotiated packed=%v, want %v", i, got, packed)
				}
				if mtu := run.NIC(i).MTU; mtu != 9000 {
					t.Errorf("eth%d MTU %d, want 9000 (VIRTIO_NET_F_MTU)", i, mtu)
				}
			}
			for _, d := range []*vhost.Device{a, b} {
				inf := d.Info()
				if inf.MTU != 9000 {
					t.Errorf("%s: MTU %d after NET_SET_MTU", d.Name(), inf.MTU)
				}
			}
			if e := l.errs.Load(); e != 0 {
				t.Fatalf("%d data path errors", e)
			}
			st := txStats(a)
			t.Logf("loop forwarded %d frames, slept %d times; eth0 sent %d frames, %d bytes", l.forwarded.Load(), l.sleeps.Load(), st.Packets, st.Bytes)
			if st.Packets < 8 || st.Dropped() != 0 {
				t.Fatalf("eth0's TX queue: %+v", st)
			}
		})
	}
}

func txStats(d *vhost.Device) virtionet.Stats { return d.TxQueue(0).Stats() }

// TestQEMUBackendRestart: QEMU listens (server=on chardev) and the devices
// connect to it (client mode). Mid-run both devices are closed and opened
// again; they reconnect, QEMU sets the rings up anew, and the guest's
// pings, lost during the outage, come back.
//
// Split ring only, to keep to one boot: QEMU 7.2 resumes a split ring
// whose back-end vanished from the used index in guest memory, but has
// nothing to resume a packed ring from (virtio_queue_packed_restore_last_avail_idx
// is empty; only INFLIGHT_SHMFD, which QEMU's vhost-user-net does not use,
// would carry it) and sends the state of the ring's first setup; the
// device then resumes from the descriptors (docs/reconnect.md).
// TestRestartUnderTraffic (cmd/xvswitch) kills a real xvswitch under
// traffic with a guest on each ring kind.
func TestQEMUBackendRestart(t *testing.T) {
	requireQEMU(t)
	dir := t.TempDir()
	s0, s1 := filepath.Join(dir, "a.sock"), filepath.Join(dir, "b.sock")
	open := func(name, sock string) *vhost.Device {
		d, err := vhost.Open(vhost.Config{Name: name, Path: sock, Client: true,
			ReconnectMin: 50 * time.Millisecond, ReconnectMax: 500 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	cfg := qemu.GuestConfig{
		NICs: []qemu.GuestNIC{
			{Socket: s0, Server: true, Addr: "10.78.0.1/24"},
			{Socket: s1, Server: true, Addr: "10.78.0.2/24", Netns: "far"},
		},
		// Pings that fail (the outage), then three answered after it.
		Commands: []qemu.GuestCommand{qemu.GuestOutage("outage", "", "10.78.0.2", 3)},
		Timeout:  180 * time.Second,
	}
	cfg.Commands[0].Timeout = 150 * time.Second
	g := qemu.StartGuest(t, cfg)
	a, b := open("vm-a", s0), open("vm-b", s1)
	l := startLoop(t, a, b)
	t.Cleanup(func() { _ = l.a.Load().Close(); _ = l.b.Load().Close() })

	// Wait for pings to flow, then restart both back-ends.
	deadline := time.Now().Add(120 * time.Second)
	for txStats(a).Packets < 6 {
		if time.Now().After(deadline) {
			t.Fatalf("no pings through the loop: %+v", txStats(a))
		}
		time.Sleep(50 * time.Millisecond)
	}
	before := l.forwarded.Load()
	_ = a.Close()
	_ = b.Close()
	time.Sleep(2 * time.Second) // long enough for pings to fail
	a2, b2 := open("vm-a", s0), open("vm-b", s1)
	l.a.Store(a2)
	l.b.Store(b2)

	run := g.Wait()
	run.RequireOK(t, cfg)
	t.Logf("%s; loop forwarded %d frames before the restart, %d in all", run.Result("outage").Output, before, l.forwarded.Load())
	if e := l.errs.Load(); e != 0 {
		t.Fatalf("%d data path errors", e)
	}
	if txStats(a2).Packets < 3 {
		t.Fatalf("the restarted device forwarded %+v", txStats(a2))
	}
}
