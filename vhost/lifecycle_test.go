package vhost

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/xvswitch/xvswitch/virtq"
	"github.com/xvswitch/xvswitch/virtq/drivertest"
)

// TestGetVringBase stops the rings with GET_VRING_BASE, checks the state
// against the guest's own indexes, and restarts them from it, as QEMU does
// around a guest reboot or a migration.
func TestGetVringBase(t *testing.T) {
	for _, packed := range []bool{true, false} {
		t.Run(fmt.Sprintf("packed=%v", packed), func(t *testing.T) {
			s := startSession(t, Config{}, packed, featBase)
			s.guestSend(t, frame(100, 1), frame(200, 2), frame(300, 3))
			if got := len(s.deviceReceive(t)); got != 3 {
				t.Fatalf("received %d", got)
			}
			if _, err := s.tx.reap(); err != nil {
				t.Fatal(err)
			}
			// Two more sent but not yet popped: they must survive the stop.
			s.guestSend(t, frame(400, 4), frame(500, 5))

			p := s.f.call(reqGetVringBase, stateb(1, 0))
			st := vringState{le.Uint32(p), le.Uint32(p[4:])}
			want := uint32(3)
			if packed {
				want = 3 | 1<<15 | 3<<16 | 1<<31
			}
			if st.index != 1 || st.num != want {
				t.Fatalf("GET_VRING_BASE = %+v, want num %#x", st, want)
			}
			if a := s.d.TxQueue(0).Begin(); a != nil {
				s.d.TxQueue(0).End()
				t.Fatal("TX queue still running after GET_VRING_BASE")
			}
			waitFor(t, "stopped event", func() bool { return hasEvent(s.mu, s.evs, EventStopped) })
			if s.d.Info().Ready {
				t.Fatal("device still ready")
			}

			// Restart from the state: the two pending frames come out.
			kick := eventfd(t)
			s.f.mustAck(reqSetVringBase, stateb(1, st.num))
			s.f.mustAck(reqSetVringKick, u64b(1), kick)
			s.f.kickFDs[1] = kick
			waitFor(t, "ready again", func() bool { return s.d.Info().Ready })
			got := s.deviceReceive(t)
			if len(got) != 2 || !bytes.Equal(got[0], frame(400, 4)) || !bytes.Equal(got[1], frame(500, 5)) {
				t.Fatalf("after restart: %d frames", len(got))
			}
			if cs, err := s.tx.reap(); err != nil || len(cs) != 2 {
				t.Fatalf("reaped %d, %v", len(cs), err)
			}
		})
	}
}

// guestMappings counts this process's mappings of drivertest memfds: the
// front-end's own (one per region) plus the device's.
func guestMappings(t testing.TB) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), "memfd:drivertest-guest")
}

// TestMemTableReplacedUnderTraffic replaces the memory table again and
// again while a poller goroutine forwards the guest's frames: every frame
// arrives exactly once, intact, and the old mappings are unmapped.
func TestMemTableReplacedUnderTraffic(t *testing.T) {
	for _, packed := range []bool{true, false} {
		t.Run(fmt.Sprintf("packed=%v", packed), func(t *testing.T) {
			base := guestMappings(t)
			s := startSession(t, Config{}, packed, featBase)
			if got := guestMappings(t) - base; got != 4 {
				t.Fatalf("%d guest mappings, want 4 (2 regions, front-end and device)", got)
			}
			var got atomic.Int64
			var bad atomic.Int64
			stop := make(chan struct{})
			var wg sync.WaitGroup
			var once sync.Once
			halt := func() { once.Do(func() { close(stop) }); wg.Wait() }
			t.Cleanup(halt)
			wg.Add(1)
			go func() {
				defer wg.Done()
				q := s.d.TxQueue(0)
				for {
					select {
					case <-stop:
						return
					default:
					}
					a := q.Begin()
					if a == nil {
						continue
					}
					n, err := a.Tx.Receive(virtq.MaxBurst)
					if err != nil {
						bad.Add(1)
					}
					fr := a.Tx.Frames()
					for i := 0; i < fr.Len(); i++ {
						b := make([]byte, fr.FrameLen(i))
						fr.Peek(i, b)
						if !bytes.Equal(b, frame(len(b), byte(len(b)))) {
							bad.Add(1)
						}
					}
					got.Add(int64(fr.Len()))
					_ = n
					_ = a.Tx.Complete()
					q.End()
				}
			}()
			const total = 600
			sent := 0
			for sent < total {
				for i := 0; i < 20; i++ {
					n := 60 + sent%900
					s.guestSend(t, frame(n, byte(n)))
					sent++
				}
				// The table changes while the poller is busy with them.
				s.f.mustAck(reqSetMemTable, memTableb(s.f.regions()...), s.f.fds...)
				waitFor(t, "frames so far", func() bool { return got.Load() >= int64(sent) })
				if _, err := s.tx.reap(); err != nil {
					t.Fatal(err)
				}
			}
			halt()
			if bad.Load() != 0 {
				t.Fatalf("%d bad frames or errors", bad.Load())
			}
			if got.Load() != total {
				t.Fatalf("got %d frames, sent %d", got.Load(), total)
			}
			if _, err := s.tx.reap(); err != nil {
				t.Fatal(err)
			}
			if m := guestMappings(t) - base; m != 4 {
				t.Fatalf("%d guest mappings after %d table replacements, want 4: old tables not unmapped", m, total/20)
			}
		})
	}
}

// TestMemSlots builds the table region by region (CONFIGURE_MEM_SLOTS, as
// QEMU does when both sides support it) and removes one.
func TestMemSlots(t *testing.T) {
	d, _, _ := newDevice(t, Config{})
	f := connect(t, d)
	f.negotiate(featBase|1<<virtq.FeatureRingPacked, protoQEMU)
	m, fds, err := drivertest.NewSharedMem(1<<20, 1<<20, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	f.mem, f.fds = m, fds
	base := guestMappings(t)
	for i, r := range f.regions() {
		f.mustAck(reqAddMemReg, append(make([]byte, 8), regionb(r)...), fds[i])
	}
	if inf := d.Info(); inf.Regions != 3 {
		t.Fatalf("%d regions", inf.Regions)
	}
	if got := guestMappings(t) - base; got != 3 {
		t.Fatalf("%d device mappings", got)
	}
	// Rings live in region 0; removing region 2 keeps them running.
	rx := newGuestRing(m, true, 64)
	tx := newGuestRing(m, true, 64)
	f.setupRing(0, rx, protoQEMU, true)
	f.setupRing(1, tx, protoQEMU, true)
	waitFor(t, "ready", func() bool { return d.Info().Ready })
	f.mustAck(reqRemMemReg, append(make([]byte, 8), regionb(f.regions()[2])...))
	if inf := d.Info(); inf.Regions != 2 || !inf.Ready {
		t.Fatalf("after REM_MEM_REG: %+v", inf)
	}
	if got := guestMappings(t) - base; got != 2 {
		t.Fatalf("%d device mappings after REM_MEM_REG", got)
	}
	// A region that overlaps one already there is refused: broken.
	fd := memfd(t, 1<<20)
	defer closeFD(fd)
	r := f.regions()[0]
	if v, err := f.ack(reqAddMemReg, append(make([]byte, 8), regionb(r)...), fd); err != nil || v == 0 {
		t.Fatalf("overlapping ADD_MEM_REG: ack %d, %v", v, err)
	}
	if err := f.expectClosed(); !errors.Is(err, ErrBadMemTable) {
		t.Fatalf("ended with %v", err)
	}
}

// TestBreak: a guest that puts a descriptor outside its memory gets its
// own device broken and its connection closed; another device carries on.
func TestBreak(t *testing.T) {
	for _, packed := range []bool{true, false} {
		t.Run(fmt.Sprintf("packed=%v", packed), func(t *testing.T) {
			var status uint8
			var seen sync.Once
			bad := startSession(t, Config{Name: "bad", OnEvent: func(e Event) {
				if e.Kind == EventBroken {
					seen.Do(func() { status = e.Device.Info().Status })
				}
			}}, packed, featBase)
			good := startSession(t, Config{Name: "good"}, packed, featBase)
			bad.f.mustAck(reqSetStatus, u64b(StatusAcknowledge|StatusDriver|StatusFeaturesOK|StatusDriverOK))

			// A chain pointing below guest memory (regions start at 1 GiB).
			if _, err := bad.tx.add(drivertest.PackedBuf{Addr: 0x1000, Len: 100}); err != nil {
				t.Fatal(err)
			}
			q := bad.d.TxQueue(0)
			a := q.Begin()
			if a == nil {
				t.Fatal("not running")
			}
			_, err := a.Tx.Receive(virtq.MaxBurst)
			if !errors.Is(err, virtq.ErrBadAddress) {
				t.Fatalf("Receive: %v, want ErrBadAddress", err)
			}
			a.Break(err)
			q.End()
			if err := bad.f.expectClosed(); !errors.Is(err, virtq.ErrBadAddress) {
				t.Fatalf("bad session ended with %v", err)
			}
			if !hasEvent(bad.mu, bad.evs, EventBroken) || !hasEvent(bad.mu, bad.evs, EventGone) {
				t.Fatalf("events %v", *bad.evs)
			}
			if status&StatusNeedsReset == 0 {
				t.Fatalf("status %#x at EventBroken, want NEEDS_RESET", status)
			}
			if inf := bad.d.Info(); inf.Connected || !errors.Is(inf.LastError, virtq.ErrBadAddress) {
				t.Fatalf("bad device: %+v", inf)
			}
			// A late Break of the dead session is harmless.
			a.Break(errors.New("late"))

			// The other device still forwards.
			good.guestSend(t, frame(64, 7))
			if got := good.deviceReceive(t); len(got) != 1 || !bytes.Equal(got[0], frame(64, 7)) {
				t.Fatalf("good device: %d frames", len(got))
			}
			// And the broken one takes a new front-end.
			f := connect(t, bad.d)
			if got := f.callU64(reqGetFeatures); got != bad.d.offered {
				t.Fatal("no answer from the reconnected device")
			}
		})
	}
}

// TestSessionFDs runs a whole session (rings, kick and call replaced, the
// memory table replaced, rings stopped, reset, disconnect) and checks
// that every fd the device received or made is closed and every mapping
// unmapped once it is over.
func TestSessionFDs(t *testing.T) {
	fds, maps := countFDs(t), guestMappings(t)
	t.Run("session", func(t *testing.T) {
		s := startSession(t, Config{QueuePairs: 2}, true, featBase|1<<NetFeatureMQ)
		s.guestSend(t, frame(100, 1))
		s.deviceReceive(t)
		for i := 0; i < 3; i++ {
			k, c := eventfd(t), eventfd(t)
			s.f.mustAck(reqSetVringKick, u64b(1), k)
			s.f.mustAck(reqSetVringCall, u64b(1), c)
			closeFD(k)
			closeFD(c)
			s.f.mustAck(reqSetMemTable, memTableb(s.f.regions()...), s.f.fds...)
		}
		e := eventfd(t)
		s.f.mustAck(reqSetVringErr, u64b(0), e)
		closeFD(e)
		s.f.call(reqGetVringBase, stateb(0, 0))
		s.f.mustAck(reqResetOwner, nil)
		if s.d.Info().Ready {
			t.Fatal("ready after RESET_OWNER")
		}
		_ = s.f.c.Close()
		if err := <-s.f.done; err != nil {
			t.Fatalf("session ended with %v", err)
		}
	})
	if got := countFDs(t); got != fds {
		t.Fatalf("%d fds open before, %d after", fds, got)
	}
	if got := guestMappings(t); got != maps {
		t.Fatalf("%d guest mappings before, %d after", maps, got)
	}
}

// TestDataPathAllocs: the per-burst device calls allocate nothing.
func TestDataPathAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	s := startSession(t, Config{}, true, featBase)
	for i := 0; i < 200; i++ {
		s.guestSend(t, frame(64, byte(i)))
	}
	tq, rq := s.d.TxQueue(0), s.d.RxQueue(0)
	var fs [1][]byte
	fs[0] = frame(64, 1)
	allocs := testing.AllocsPerRun(100, func() {
		if a := tq.Begin(); a != nil {
			_, _ = a.Tx.Receive(1)
			_ = a.Tx.Complete()
			tq.End()
		}
		if a := rq.Begin(); a != nil {
			var f = &deliverFrames
			f.Reset()
			f.AddBytes(fs[0])
			_, _ = a.Rx.Deliver(f) // no RX buffers: dropped and counted
			rq.End()
		}
		tq.Arm()
		tq.Disarm()
		tq.Drain()
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per burst", allocs)
	}
	if st := s.d.TxQueue(0).Stats(); st.Packets != 101 {
		t.Fatalf("TX stats %+v", st) // 100 runs + the warm-up
	}
}

// TestBreakInsideBurst: a worker that breaks the device while it holds a
// queue, at the moment the control path waits for that queue, neither
// blocks nor deadlocks the control path.
func TestBreakInsideBurst(t *testing.T) {
	s := startSession(t, Config{}, true, featBase)
	q := s.d.TxQueue(0)
	a := q.Begin()
	if a == nil {
		t.Fatal("not running")
	}
	// GET_VRING_BASE makes the control path wait for this burst (with
	// d.mu held) before it can answer.
	if err := s.f.send(reqGetVringBase, flagVersion, stateb(1, 0)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the control path to wait for the queue", func() bool {
		return q.cur.Load().act == nil
	})
	broke := make(chan struct{})
	go func() {
		s.d.Break(errors.New("worker saw garbage"))
		close(broke)
	}()
	select {
	case <-broke:
	case <-time.After(ioTimeout):
		t.Fatal("Device.Break blocked while a burst was open")
	}
	q.End()
	if err := s.f.expectClosed(); err == nil || !strings.Contains(err.Error(), "worker saw garbage") {
		t.Fatalf("session ended with %v", err)
	}
}
