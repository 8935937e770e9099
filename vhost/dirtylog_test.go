package vhost_test

import (
	"bytes"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/xvswitch/xvswitch/vhost"
	"github.com/xvswitch/xvswitch/vhost/vhosttest"
	"github.com/xvswitch/xvswitch/virtionet"
	"github.com/xvswitch/xvswitch/virtq"
)

// These tests catch a device write to guest memory that is not in the
// dirty log: they snapshot the guest's memory after the driver's own
// writes, let the device run (TX completions, RX buffers and used
// entries, kick arming), and want every page whose bytes changed to have
// its bit set. Wherever the write paths move, a write left unmarked fails
// them.

// vmBurst moves one burst from src's TX queue 0 into dst's RX queue 0,
// as a switch worker does, and returns the frames taken.
func vmBurst(t *testing.T, src, dst *vhost.Device) int {
	t.Helper()
	n := 0
	a := src.TxQueue(0).Begin()
	if a == nil {
		t.Fatal("TX queue not running")
	}
	defer src.TxQueue(0).End()
	var err error
	if n, err = a.Tx.Receive(virtq.MaxBurst); err != nil {
		t.Fatal(err)
	}
	if b := dst.RxQueue(0).Begin(); b != nil {
		_, err = b.Rx.Deliver(a.Tx.Frames())
		dst.RxQueue(0).End()
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Tx.Complete(); err != nil {
		t.Fatal(err)
	}
	return n
}

// requireLogged fails for every page changed since before whose bit is
// not set, and returns how many pages changed.
func requireLogged(t *testing.T, who string, f *vhosttest.FrontEnd, l *vhosttest.Log, before map[uint64][]byte) int {
	t.Helper()
	changed := f.ChangedPages(before)
	for _, gpa := range changed {
		if !l.Dirty(gpa) {
			t.Errorf("%s: page %#x written by the device but not in the dirty log", who, gpa)
		}
	}
	return len(changed)
}

func TestDirtyLogCoversDeviceWrites(t *testing.T) {
	for _, packed := range []bool{true, false} {
		for _, mrg := range []bool{true, false} {
			for _, inOrder := range []bool{true, false} {
				t.Run(fmt.Sprintf("packed=%v,mrg=%v,in_order=%v", packed, mrg, inOrder), func(t *testing.T) {
					testDirtyLog(t, packed, mrg, inOrder)
				})
			}
		}
	}
}

func testDirtyLog(t *testing.T, packed, mrg, inOrder bool) {
	cfg := vhost.Config{MTU: 9000}
	da, _, _ := newDevice(t, cfg)
	db, _, _ := newDevice(t, cfg)
	a, b := vhosttest.Connect(t, da), vhosttest.Connect(t, db)
	feat := uint64(1)<<virtq.FeatureVersion1 | 1<<vhost.FeatureProtocolFeatures | 1<<virtq.FeatureEventIdx
	if mrg {
		feat |= 1 << vhost.NetFeatureMrgRxbuf
	}
	if inOrder {
		feat |= 1 << virtq.FeatureInOrder
	}
	// A small ring, so that used entries wrap around it.
	o := vhosttest.Options{Packed: packed, Features: feat, Protocol: vhosttest.ProtocolMigrate, RingSize: 16}
	a.Start(o)
	b.Start(o)
	if packed && inOrder {
		a.TxRing(0).Packed().InOrder = true // batched used descriptors
	}
	la, lb := a.StartLogging(), b.StartLogging()
	if !da.Info().Ready || !db.Info().Ready || !da.Info().Logging {
		t.Fatalf("not ready after logging started: %+v %+v", da.Info(), db.Info())
	}
	sizes := []int{60, 1514, 3000, 8000, 200}
	var changedA, changedB int
	var got [][]byte
	var want [][]byte
	for round := 0; round < 6; round++ {
		var frames [][]byte
		bufs := 0
		for i, n := range sizes {
			if !mrg && n > 1514 {
				continue // one 2 KiB buffer per frame
			}
			frames = append(frames, frame(n, byte(round*16+i)))
			bufs += (n + virtionet.HeaderLen + 2047) / 2048
		}
		b.PostRx(0, bufs)
		if s := a.Send(0, frames...); s != len(frames) {
			t.Fatalf("round %d: sent %d of %d", round, s, len(frames))
		}
		want = append(want, frames...)
		la.Clear()
		lb.Clear()
		snapA, snapB := a.Snapshot(), b.Snapshot()
		// The device's writes alone: a burst, kicks armed and disarmed
		// (event suppression fields), another burst.
		vmBurst(t, da, db)
		db.RxQueue(0).Arm()
		da.TxQueue(0).Arm()
		db.RxQueue(0).Disarm()
		da.TxQueue(0).Disarm()
		vmBurst(t, da, db)
		changedA += requireLogged(t, "sender", a, la, snapA)
		changedB += requireLogged(t, "receiver", b, lb, snapB)
		if t.Failed() {
			return
		}
		for _, r := range b.Receive(0) {
			got = append(got, r.Frame)
		}
		if _, err := a.TxRing(0).Reap(); err != nil {
			t.Fatal(err)
		}
	}
	if changedA == 0 || changedB == 0 {
		t.Fatalf("the device changed %d sender and %d receiver pages: the check saw nothing", changedA, changedB)
	}
	if len(got) != len(want) {
		t.Fatalf("received %d frames, want %d", len(got), len(want))
	}
	for i := range got {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("frame %d differs", i)
		}
	}
	// Logging off: the device writes as before and marks nothing (and
	// the check above would have caught those writes).
	a.StopLogging()
	b.StopLogging()
	if da.Info().Logging {
		t.Fatal("Info says logging after LOG_ALL was cleared")
	}
	la.Clear()
	lb.Clear()
	b.PostRx(0, 4)
	a.Send(0, frame(100, 9))
	snapB := b.Snapshot()
	vmBurst(t, da, db)
	if n := len(b.ChangedPages(snapB)); n == 0 {
		t.Fatal("no page changed with logging off")
	}
	if n := la.Clear() + lb.Clear(); n != 0 {
		t.Fatalf("%d pages marked with logging off", n)
	}
	if r := b.Receive(0); len(r) != 1 || !bytes.Equal(r[0].Frame, frame(100, 9)) {
		t.Fatalf("after logging stopped: received %v", r)
	}
}

// A new log replaces the old one while a poller forwards: no burst is cut
// short, no frame lost, and writes after the switch land in the new log.
func TestDirtyLogReplacedUnderTraffic(t *testing.T) {
	for _, packed := range []bool{true, false} {
		t.Run(fmt.Sprintf("packed=%v", packed), func(t *testing.T) {
			da, _, _ := newDevice(t, vhost.Config{})
			db, _, _ := newDevice(t, vhost.Config{})
			a, b := vhosttest.Connect(t, da), vhosttest.Connect(t, db)
			o := vhosttest.Options{Packed: packed, Protocol: vhosttest.ProtocolMigrate}
			a.Start(o)
			b.Start(o)
			b.StartLogging()
			stop := make(chan struct{})
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					if q := da.TxQueue(0); true {
						if a := q.Begin(); a != nil {
							if _, err := a.Tx.Receive(virtq.MaxBurst); err == nil {
								if r := db.RxQueue(0).Begin(); r != nil {
									_, _ = r.Rx.Deliver(a.Tx.Frames())
									db.RxQueue(0).End()
								}
								_ = a.Tx.Complete()
							}
							q.End()
						}
					}
				}
			}()
			defer func() { close(stop); wg.Wait() }()
			var l *vhosttest.Log
			received := 0
			for round := 0; round < 20; round++ {
				l = b.SetLogBase(b.LogSizeFor())
				b.PostRx(0, 8)
				a.Send(0, frame(500, byte(round)))
				deadline := time.Now().Add(vhosttest.Timeout)
				var rs []vhosttest.Received
				for len(rs) == 0 && time.Now().Before(deadline) {
					rs = b.Receive(0)
					if _, err := a.TxRing(0).Reap(); err != nil {
						t.Fatal(err)
					}
				}
				if len(rs) != 1 || !bytes.Equal(rs[0].Frame, frame(500, byte(round))) {
					t.Fatalf("round %d: received %d frames", round, len(rs))
				}
				received++
				// Drain what the device still holds before the next log
				// replaces this one.
				if l.Clear() == 0 {
					t.Fatalf("round %d: the frame's pages are not in the new log", round)
				}
			}
			// The poller publishes its counters just after the Push the
			// guest saw: give the last burst's a moment.
			got := db.RxQueue(0).Stats()
			for deadline := time.Now().Add(vhosttest.Timeout); got.Packets < uint64(received) && time.Now().Before(deadline); got = db.RxQueue(0).Stats() {
				time.Sleep(time.Millisecond)
			}
			if got.Packets != uint64(received) {
				t.Fatalf("RX stats %+v, want %d packets: logging must not restart the counters", got, received)
			}
		})
	}
}

// A front-end's log is checked before it is mapped; a bad one breaks the
// device with the reason.
func TestDirtyLogHostile(t *testing.T) {
	memfd := func(size int64) int { return vhosttest.MemFD(t, size) }
	payload := func(size, offset uint64) []byte { return append(vhosttest.U64(size), vhosttest.U64(offset)...) }
	cases := []struct {
		name    string
		payload []byte
		fd      func() int
	}{
		{"no fd", payload(4096, 0), nil},
		{"empty", payload(0, 0), func() int { return memfd(4096) }},
		{"odd size", payload(12, 0), func() int { return memfd(4096) }},
		{"misaligned offset", payload(8, 4), func() int { return memfd(4096) }},
		{"longer than its file", payload(8192, 0), func() int { return memfd(4096) }},
		{"offset beyond its file", payload(8, 1<<20), func() int { return memfd(4096) }},
		{"overflowing offset", payload(8, ^uint64(7)), func() int { return memfd(4096) }},
		{"larger than any guest needs", payload(1<<40, 0), func() int { return memfd(1 << 40) }},
		{"not a file", payload(8, 0), func() int { return vhosttest.EventFD(t) }},
		{"short payload", vhosttest.U64(8), func() int { return memfd(4096) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d, _, _ := newDevice(t, vhost.Config{})
			f := vhosttest.Connect(t, d)
			f.Start(vhosttest.Options{Protocol: vhosttest.ProtocolMigrate})
			var fds []int
			if c.fd != nil {
				fds = append(fds, c.fd())
			}
			if err := f.SendMsg(vhosttest.ReqSetLogBase, vhosttest.FlagVersion, c.payload, fds...); err != nil {
				t.Fatal(err)
			}
			if err := f.WaitClosed(); err == nil {
				t.Fatal("the device took the log")
			}
			if err := d.Info().LastError; err == nil {
				t.Fatal("no reason recorded")
			}
		})
	}
	// Without LOG_SHMFD there is no log the device could map.
	d, _, _ := newDevice(t, vhost.Config{})
	f := vhosttest.Connect(t, d)
	f.Start(vhosttest.Options{})
	if err := f.SendMsg(vhosttest.ReqSetLogBase, vhosttest.FlagVersion, payload(8, 0), memfd(4096)); err != nil {
		t.Fatal(err)
	}
	if err := f.WaitClosed(); err == nil || !errors.Is(d.Info().LastError, vhost.ErrBadLog) {
		t.Fatalf("SET_LOG_BASE without LOG_SHMFD: %v, %v", err, d.Info().LastError)
	}
}

// A front-end that truncates the log under the device: the next mark
// faults, and the fault is attributed to that guest's queue (Owns), so the
// switch breaks only this guest.
func TestDirtyLogTruncated(t *testing.T) {
	d, _, _ := newDevice(t, vhost.Config{})
	f := vhosttest.Connect(t, d)
	f.Start(vhosttest.Options{Protocol: vhosttest.ProtocolMigrate})
	l := f.StartLogging()
	if err := unix.Ftruncate(l.FD(), 0); err != nil {
		t.Fatal(err)
	}
	f.PostRx(0, 1)
	var frames virtionet.Frames
	frames.AddBytes(frame(100, 1))
	q := d.RxQueue(0)
	faulted := make(chan any, 1)
	go func() {
		debug.SetPanicOnFault(true)
		defer func() { faulted <- recover() }()
		if a := q.Begin(); a != nil {
			_, _ = a.Rx.Deliver(&frames)
			q.End()
		}
	}()
	r := <-faulted
	fa, ok := r.(interface{ Addr() uintptr })
	if !ok {
		t.Fatalf("no memory fault: %v", r)
	}
	if !q.Owns(fa.Addr()) {
		t.Fatalf("fault at %#x not attributed to the guest's queue", fa.Addr())
	}
}

// The end of a migration: GET_VRING_BASE stops the receive ring, which
// gives back the buffers the device held over (MRG_RXBUF), writing their
// used entries. QEMU syncs the log only after the reply, so those writes
// must be marked by then.
func TestDirtyLogGetVringBase(t *testing.T) {
	for _, packed := range []bool{true, false} {
		t.Run(fmt.Sprintf("packed=%v", packed), func(t *testing.T) {
			da, _, _ := newDevice(t, vhost.Config{MTU: 9000})
			db, _, _ := newDevice(t, vhost.Config{MTU: 9000})
			a, b := vhosttest.Connect(t, da), vhosttest.Connect(t, db)
			o := vhosttest.Options{Packed: packed, Protocol: vhosttest.ProtocolMigrate}
			a.Start(o)
			b.Start(o)
			lb := b.StartLogging()
			b.PostRx(0, 16)
			// A first frame of three buffers: the device pops one (it has
			// seen no buffer sizes yet), then a whole burst, and holds
			// what the frame did not take.
			a.Send(0, frame(5000, 1))
			vmBurst(t, da, db)
			held := 0
			if q := db.RxQueue(0); q != nil {
				if act := q.Begin(); act != nil {
					held = act.Rx.Held()
					q.End()
				}
			}
			if held == 0 {
				t.Fatal("the device holds no receive buffers: nothing to check")
			}
			lb.Clear()
			snap := b.Snapshot()
			b.Call(vhosttest.ReqGetVringBase, vhosttest.VringState(0, 0))
			if n := requireLogged(t, "receiver", b, lb, snap); n == 0 {
				t.Fatalf("GET_VRING_BASE gave back %d held buffers and changed no page", held)
			}
		})
	}
}
