package vhost_test

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

	"golang.org/x/sys/unix"

	"github.com/xvswitch/xvswitch/vhost"
	"github.com/xvswitch/xvswitch/vhost/vhosttest"
	"github.com/xvswitch/xvswitch/virtq"
)

// TestGetVringBase stops the rings with GET_VRING_BASE, checks the state
// against the guest's own indexes, and restarts them from it, as QEMU does
// around a guest reboot or a migration.
func TestGetVringBase(t *testing.T) {
	for _, packed := range []bool{true, false} {
		t.Run(fmt.Sprintf("packed=%v", packed), func(t *testing.T) {
			s := startSession(t, vhost.Config{}, packed, vhosttest.DefaultFeatures)
			s.guestSend(t, frame(100, 1), frame(200, 2), frame(300, 3))
			if got := len(s.deviceReceive(t)); got != 3 {
				t.Fatalf("received %d", got)
			}
			if _, err := s.tx().Reap(); err != nil {
				t.Fatal(err)
			}
			// Two more sent but not yet popped: they must survive the stop.
			s.guestSend(t, frame(400, 4), frame(500, 5))

			index, num, ok := vhosttest.ParseVringState(s.f.Call(vhosttest.ReqGetVringBase, vhosttest.VringState(1, 0)))
			want := uint32(3)
			if packed {
				want = 3 | 1<<15 | 3<<16 | 1<<31
			}
			if !ok || index != 1 || num != want {
				t.Fatalf("GET_VRING_BASE = index %d num %#x (%v), want num %#x", index, num, ok, want)
			}
			if a := s.d.TxQueue(0).Begin(); a != nil {
				s.d.TxQueue(0).End()
				t.Fatal("TX queue still running after GET_VRING_BASE")
			}
			vhosttest.WaitFor(t, "stopped event", func() bool { return hasEvent(s.mu, s.evs, vhost.EventStopped) })
			if s.d.Info().Ready {
				t.Fatal("device still ready")
			}

			// Restart from the state: the two pending frames come out.
			s.f.MustAck(vhosttest.ReqSetVringBase, vhosttest.VringState(1, num))
			s.f.NewKick(1)
			vhosttest.WaitFor(t, "ready again", func() bool { return s.d.Info().Ready })
			got := s.deviceReceive(t)
			if len(got) != 2 || !bytes.Equal(got[0], frame(400, 4)) || !bytes.Equal(got[1], frame(500, 5)) {
				t.Fatalf("after restart: %d frames", len(got))
			}
			if cs, err := s.tx().Reap(); err != nil || len(cs) != 2 {
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
			s := startSession(t, vhost.Config{}, packed, vhosttest.DefaultFeatures)
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
				s.f.SetMemTable()
				vhosttest.WaitFor(t, "frames so far", func() bool { return got.Load() >= int64(sent) })
				if _, err := s.tx().Reap(); err != nil {
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
			if _, err := s.tx().Reap(); err != nil {
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
	d, _, _ := newDevice(t, vhost.Config{})
	f := vhosttest.Connect(t, d)
	f.Negotiate(vhosttest.DefaultFeatures|1<<virtq.FeatureRingPacked, vhosttest.ProtocolQEMU)
	f.NewMemory(1<<20, 1<<20, 1<<20)
	base := guestMappings(t)
	for i, r := range f.Regions() {
		f.MustAck(vhosttest.ReqAddMemReg, vhosttest.MemReg(r), f.MemFDs()[i])
	}
	if inf := d.Info(); inf.Regions != 3 {
		t.Fatalf("%d regions", inf.Regions)
	}
	if got := guestMappings(t) - base; got != 3 {
		t.Fatalf("%d device mappings", got)
	}
	// Rings live in region 0; removing region 2 keeps them running.
	f.SetupRing(0, f.NewRing(true, 64), true)
	f.SetupRing(1, f.NewRing(true, 64), true)
	vhosttest.WaitFor(t, "ready", func() bool { return d.Info().Ready })
	f.MustAck(vhosttest.ReqRemMemReg, vhosttest.MemReg(f.Regions()[2]))
	if inf := d.Info(); inf.Regions != 2 || !inf.Ready {
		t.Fatalf("after REM_MEM_REG: %+v", inf)
	}
	if got := guestMappings(t) - base; got != 2 {
		t.Fatalf("%d device mappings after REM_MEM_REG", got)
	}
	// A region that overlaps one already there is refused: broken.
	fd := vhosttest.MemFD(t, 1<<20)
	defer unix.Close(fd)
	r := f.Regions()[0]
	if v, err := f.Ack(vhosttest.ReqAddMemReg, vhosttest.MemReg(r), fd); err != nil || v == 0 {
		t.Fatalf("overlapping ADD_MEM_REG: ack %d, %v", v, err)
	}
	if err := f.WaitClosed(); !errors.Is(err, vhost.ErrBadMemTable) {
		t.Fatalf("ended with %v", err)
	}
}

// TestMemSlotsPerQueuePair: QEMU 7.2 (Debian 12's) with two queue pairs
// sends every ADD_MEM_REG and REM_MEM_REG twice, once per pair, each copy
// with an fd of its own. The copies are acknowledged, a region is mapped
// once, and both queue pairs run over the table.
func TestMemSlotsPerQueuePair(t *testing.T) {
	d, _, _ := newDevice(t, vhost.Config{QueuePairs: 2})
	f := vhosttest.Connect(t, d)
	f.Negotiate(vhosttest.DefaultFeatures|1<<virtq.FeatureRingPacked, vhosttest.ProtocolQEMU)
	f.NewMemory(1<<20, 1<<20, 1<<20)
	base := guestMappings(t)
	for pair := 0; pair < 2; pair++ {
		for i, r := range f.Regions() {
			fd, err := unix.Dup(f.MemFDs()[i])
			if err != nil {
				t.Fatal(err)
			}
			f.MustAck(vhosttest.ReqAddMemReg, vhosttest.MemReg(r), fd)
			unix.Close(fd)
		}
	}
	if inf := d.Info(); inf.Regions != 3 {
		t.Fatalf("%d regions after each region was added twice, want 3", inf.Regions)
	}
	if got := guestMappings(t) - base; got != 3 {
		t.Fatalf("%d device mappings, want 3", got)
	}
	for q := 0; q < 4; q++ {
		f.SetupRing(q, f.NewRing(true, 64), true)
	}
	vhosttest.WaitFor(t, "ready", func() bool { return d.Info().Ready })
	f.MustAck(vhosttest.ReqRemMemReg, vhosttest.MemReg(f.Regions()[2]))
	f.MustAck(vhosttest.ReqRemMemReg, vhosttest.MemReg(f.Regions()[2]))
	if inf := d.Info(); inf.Regions != 2 || !inf.Ready {
		t.Fatalf("after REM_MEM_REG twice: %+v", inf)
	}
	if got := guestMappings(t) - base; got != 2 {
		t.Fatalf("%d device mappings after REM_MEM_REG, want 2", got)
	}
}

// TestBreak: a guest that puts a descriptor outside its memory gets its
// own device broken and its connection closed; another device carries on.
func TestBreak(t *testing.T) {
	for _, packed := range []bool{true, false} {
		t.Run(fmt.Sprintf("packed=%v", packed), func(t *testing.T) {
			var status uint8
			var seen sync.Once
			bad := startSession(t, vhost.Config{Name: "bad", OnEvent: func(e vhost.Event) {
				if e.Kind == vhost.EventBroken {
					seen.Do(func() { status = e.Device.Info().Status })
				}
			}}, packed, vhosttest.DefaultFeatures)
			good := startSession(t, vhost.Config{Name: "good"}, packed, vhosttest.DefaultFeatures)
			bad.f.MustAck(vhosttest.ReqSetStatus, vhosttest.U64(vhost.StatusAcknowledge|vhost.StatusDriver|vhost.StatusFeaturesOK|vhost.StatusDriverOK))

			// A chain pointing below guest memory (regions start at 1 GiB).
			if _, err := bad.tx().Add(vhosttest.Buf{Addr: 0x1000, Len: 100}); err != nil {
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
			if err := bad.f.WaitClosed(); !errors.Is(err, virtq.ErrBadAddress) {
				t.Fatalf("bad session ended with %v", err)
			}
			if !hasEvent(bad.mu, bad.evs, vhost.EventBroken) || !hasEvent(bad.mu, bad.evs, vhost.EventGone) {
				t.Fatalf("events %v", *bad.evs)
			}
			if status&vhost.StatusNeedsReset == 0 {
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
			f := vhosttest.Connect(t, bad.d)
			if got := f.CallU64(vhosttest.ReqGetFeatures); got != bad.d.Info().Offered {
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
		s := startSession(t, vhost.Config{QueuePairs: 2}, true, vhosttest.DefaultFeatures|1<<vhost.NetFeatureMQ)
		s.guestSend(t, frame(100, 1))
		s.deviceReceive(t)
		for i := 0; i < 3; i++ {
			k, c := vhosttest.EventFD(t), vhosttest.EventFD(t)
			s.f.MustAck(vhosttest.ReqSetVringKick, vhosttest.U64(1), k)
			s.f.MustAck(vhosttest.ReqSetVringCall, vhosttest.U64(1), c)
			_ = unix.Close(k)
			_ = unix.Close(c)
			s.f.SetMemTable()
		}
		e := vhosttest.EventFD(t)
		s.f.MustAck(vhosttest.ReqSetVringErr, vhosttest.U64(0), e)
		_ = unix.Close(e)
		s.f.Call(vhosttest.ReqGetVringBase, vhosttest.VringState(0, 0))
		s.f.MustAck(vhosttest.ReqResetOwner, nil)
		if s.d.Info().Ready {
			t.Fatal("ready after RESET_OWNER")
		}
		if err := s.f.Close(); err != nil {
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
	s := startSession(t, vhost.Config{}, true, vhosttest.DefaultFeatures)
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
	s := startSession(t, vhost.Config{}, true, vhosttest.DefaultFeatures)
	q := s.d.TxQueue(0)
	a := q.Begin()
	if a == nil {
		t.Fatal("not running")
	}
	// GET_VRING_BASE makes the control path wait for this burst (with
	// d.mu held) before it can answer.
	if err := s.f.SendMsg(vhosttest.ReqGetVringBase, vhosttest.FlagVersion, vhosttest.VringState(1, 0)); err != nil {
		t.Fatal(err)
	}
	vhosttest.WaitFor(t, "the control path to wait for the queue", func() bool { return vhost.Unpublished(q) })
	broke := make(chan struct{})
	go func() {
		s.d.Break(errors.New("worker saw garbage"))
		close(broke)
	}()
	select {
	case <-broke:
	case <-time.After(vhosttest.Timeout):
		t.Fatal("Device.Break blocked while a burst was open")
	}
	q.End()
	if err := s.f.WaitClosed(); err == nil || !strings.Contains(err.Error(), "worker saw garbage") {
		t.Fatalf("session ended with %v", err)
	}
}
