package vswitch

import (
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/xvswitch/xvswitch/portspec"
	"github.com/xvswitch/xvswitch/vhost/vhosttest"
)

// vhostRig is a switch with three guests (in-process front-ends,
// vhosttest) whose first sends bursts of MaxBurst frames to the others
// over the bridge: all to b ("whole"), or alternately to b and c
// ("halves", each getting part of the burst).
type vhostRig struct {
	s      *Switch
	fes    []*vhosttest.FrontEnd
	w      *worker
	snap   *snapshot
	in     *ingress // a's TX queue
	frames [][]byte
	halves bool
}

func newVhostRig(tb testing.TB, packed, halves bool) *vhostRig {
	s, err := New(Config{Workers: 1, Ctl: "x"})
	if err != nil {
		tb.Fatal(err)
	}
	r := &vhostRig{s: s, halves: halves}
	tb.Cleanup(r.close)
	macs := []uint64{0x0200_0000_0001, 0x0200_0000_0002, 0x0200_0000_0003}
	for i, name := range []string{"a", "b", "c"} {
		path := filepath.Join(tb.TempDir(), name+".sock")
		if err := s.AddVhost(portspec.Vhost{Name: name, Path: path, Queues: 1, MAC: MACString(macs[i])}); err != nil {
			tb.Fatal(err)
		}
		fe := vhosttest.Dial(tb, path)
		fe.Start(vhosttest.Options{Packed: packed})
		for deadline := time.Now().Add(5 * time.Second); portState(s, name) != "ready"; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				tb.Fatalf("guest %s never got ready", name)
			}
		}
		r.fes = append(r.fes, fe)
	}
	for i := 0; i < MaxBurst; i++ {
		dst := macs[1]
		if halves && i%2 == 1 {
			dst = macs[2]
		}
		r.frames = append(r.frames, ethFrame(dst, macs[0], "0123456789012345678901234567890123456789012345678901"))
	}
	r.w, r.snap = s.workers[0], s.snap.Load()
	for _, q := range r.snap.polls[0] {
		if q.port.name == "a" {
			r.in = q
		}
	}
	return r
}

// send posts the receivers' buffers for one burst and has a send it.
func (r *vhostRig) send(tb testing.TB) {
	if r.halves {
		r.fes[1].PostRx(0, MaxBurst/2)
		r.fes[2].PostRx(0, MaxBurst/2)
	} else {
		r.fes[1].PostRx(0, MaxBurst)
	}
	if n := r.fes[0].Send(0, r.frames...); n != MaxBurst {
		tb.Fatalf("sent %d", n)
	}
}

// forward has the worker forward a's burst.
func (r *vhostRig) forward(tb testing.TB) {
	if n, err := r.w.forwardSafe(r.snap, r.in); n != MaxBurst || err != nil {
		tb.Fatalf("forwarded %d, %v", n, err)
	}
}

// reap takes what b and c received and returns how many frames.
func (r *vhostRig) reap() int { return len(r.fes[1].Receive(0)) + len(r.fes[2].Receive(0)) }

func (r *vhostRig) close() {
	if r.in != nil {
		if h, ok := r.in.q.(interface{ letGo(int) }); ok {
			h.letGo(0) // so that removeAll finds the queue free
		}
	}
	r.s.removeAll()
}

// BenchmarkVhostToVhostBurst32 forwards bursts of 32 frames a guest sent
// on its TX ring into other guests' RX rings (vhostRig): what a burst
// costs from the guest's chains to the receivers' used entries, the
// frames' descriptions handed from one queue to the next. Only the
// worker's forward is timed (the front-ends' sending and reaping are not),
// and only it is what callgrind should count
// (--toggle-collect='*forwardSafe'). The receiving front-ends ask for
// interrupts, so much of what it times is the eventfd writes that raise
// them (packed/whole, pprof, 2026-12-04: 0.19 of forwardSafe's 0.32 s in
// unix.Write): it says what a burst costs with notifications, not what
// the rings cost; the package benchmarks of packed/, split/ and virtionet
// do that.
func BenchmarkVhostToVhostBurst32(b *testing.B) {
	for _, packed := range []bool{true, false} {
		for _, mode := range []string{"whole", "halves"} {
			b.Run(ringName(packed)+"/"+mode, func(b *testing.B) {
				r := newVhostRig(b, packed, mode == "halves")
				got := 0
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					b.StopTimer()
					r.send(b)
					b.StartTimer()
					r.forward(b)
					b.StopTimer()
					got += r.reap()
					b.StartTimer()
				}
				b.StopTimer()
				if got != b.N*MaxBurst {
					b.Fatalf("the guests got %d frames of %d", got, b.N*MaxBurst)
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*MaxBurst), "ns/frame")
			})
		}
	}
}

// TestVhostToVhostNoAllocs: a guest's burst forwarded into other guests'
// RX queues, whole or in parts, allocates nothing (the front-ends'
// sending and reaping, which do, are left out of the count).
func TestVhostToVhostNoAllocs(t *testing.T) {
	for _, packed := range []bool{true, false} {
		for _, halves := range []bool{false, true} {
			r := newVhostRig(t, packed, halves)
			var before, after runtime.MemStats
			var allocs uint64
			const bursts = 50
			got := 0
			for i := 0; i < bursts+1; i++ {
				r.send(t)
				runtime.ReadMemStats(&before)
				r.forward(t)
				runtime.ReadMemStats(&after)
				if i > 0 { // the first burst may set things up
					allocs += after.Mallocs - before.Mallocs
				}
				got += r.reap()
			}
			if got != (bursts+1)*MaxBurst {
				t.Fatalf("%s halves=%v: the guests got %d frames of %d", ringName(packed), halves, got, (bursts+1)*MaxBurst)
			}
			// Per burst, as testing.AllocsPerRun counts (integer
			// division): the front-ends' goroutines, serving the
			// switch's kicks and interrupts meanwhile, allocate now and
			// then; a burst that allocated would count at least 1.
			if a := allocs / bursts; a != 0 {
				t.Errorf("%s halves=%v: %d allocations per burst (%d in %d)", ringName(packed), halves, a, allocs, bursts)
			}
		}
	}
}
