package packed_test

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/xvswitch/xvswitch/guestmem"
	"github.com/xvswitch/xvswitch/virtq"
	"github.com/xvswitch/xvswitch/virtq/drivertest"
)

const benchRingSize = 256

// burstLoop is the shape of the benchmarks and of the allocation test,
// mirroring split's BenchmarkSplitBurst32: a ring of 256 descriptors; per
// iteration the driver model makes 32 chains available (by default single
// descriptors of 1500 readable bytes: transmit frames), the device pops the
// burst of 32, pushes 32 used entries and decides once whether to notify.
// Then the driver either reaps the used descriptors, checking each (reap),
// or takes its buffers back without reading them, as split's benchmark does.
//
// With lean, the driver side is what split's benchmark driver does and no
// more (postLean), so that the two benchmarks differ only in the device
// side and in what each ring's format makes the driver write.
type burstLoop struct {
	e      *env
	bufs   []drivertest.PackedBuf // one chain, or (single) 32 one-buffer chains
	single bool
	reap   bool
	lean   bool
	next   uint16 // lean: the driver's next slot and its wrap counter
	wrap   bool
	used   [virtq.MaxBurst]virtq.Used
	done   []drivertest.PackedCompletion
	device time.Duration // with timed steps: the device side's time
}

func newBurstLoop(tb testing.TB, features uint64, chain func(e *env) []drivertest.PackedBuf) *burstLoop {
	e := newEnv(tb, benchRingSize, features, 8<<20)
	e.d.SetDriverEvent(drivertest.PackedEventEnable, 0)
	l := &burstLoop{e: e, done: make([]drivertest.PackedCompletion, 0, benchRingSize), wrap: true}
	if chain == nil {
		l.single = true
		for i := 0; i < virtq.MaxBurst; i++ {
			l.bufs = append(l.bufs, drivertest.PackedBuf{Addr: e.bufBase + uint64(i)*2048, Len: 1500})
		}
	} else {
		l.bufs = chain(e)
	}
	return l
}

// postLean makes 32 single-descriptor chains of 1500 readable bytes
// available the way split's benchmark driver makes its heads available:
// with no id allocation and no in-flight bookkeeping (the id is the slot,
// as split's head is the descriptor, and each comes back before its slot
// does), a fixed buffer per slot. Each descriptor is written whole, which
// a packed driver must do (the device's used descriptor overwrote its id,
// length and flags; split's descriptors are written once, and only the
// 2-byte avail entries per burst), the first one's flags last, with a
// release store (split's driver publishes its avail index so). Taking the
// buffers back needs nothing: they are all used by the time the slots
// come round. The driver model's own state goes stale, unused.
func (l *burstLoop) postLean() {
	desc, base := l.e.d.Desc(), l.e.bufBase
	head, headWord := l.next, uint32(0)
	for i := 0; i < virtq.MaxBurst; i++ {
		slot := int(l.next)
		flags := uint32(drivertest.PackedUsed)
		if l.wrap {
			flags = drivertest.PackedAvail
		}
		d := desc[slot*16 : slot*16+16]
		binary.LittleEndian.PutUint64(d[0:], base+uint64(slot)*2048)
		binary.LittleEndian.PutUint32(d[8:], 1500)
		if w := uint32(slot) | flags<<16; i == 0 {
			headWord = w
		} else {
			binary.LittleEndian.PutUint32(d[12:], w)
		}
		if l.next++; l.next == benchRingSize {
			l.next, l.wrap = 0, !l.wrap
		}
	}
	guestmem.StoreRelease32(desc, int(head)*16+12, headWord)
}

// step runs one burst. With timed, it adds the device side's time to
// l.device (two clock reads per burst of 32).
func (l *burstLoop) step(tb testing.TB, timed bool) {
	e := l.e
	if l.lean {
		l.postLean()
	} else if l.single {
		if n := e.d.AddBurst(l.bufs); n != virtq.MaxBurst {
			tb.Fatalf("driver added %d", n)
		}
	} else {
		for i := 0; i < virtq.MaxBurst; i++ {
			if _, err := e.d.Add(l.bufs); err != nil {
				tb.Fatal(err)
			}
		}
	}
	var t0 time.Time
	if timed {
		t0 = time.Now()
	}
	n, err := e.r.Pop(&e.b, virtq.MaxBurst)
	if n != virtq.MaxBurst || err != nil {
		tb.Fatalf("Pop: %d, %v", n, err)
	}
	for i := 0; i < n; i++ {
		c := &e.b.Chains[i]
		l.used[i] = virtq.Used{ID: c.ID, Descs: c.Descs, Len: c.WriteLen}
	}
	if err := e.r.Push(l.used[:n]); err != nil {
		tb.Fatal(err)
	}
	e.r.NeedNotify()
	if timed {
		l.device += time.Since(t0)
	}
	if l.lean {
		return
	}
	if !l.reap {
		e.d.Recycle()
		if na, naw := e.d.NextAvail(); true {
			if nu, nuw := e.d.NextUsed(); nu != na || nuw != naw {
				tb.Fatalf("after Recycle the driver expects used at %d/%t, next avail %d/%t", nu, nuw, na, naw)
			}
		}
		return
	}
	l.done, err = e.d.Reap(l.done[:0])
	if err != nil || len(l.done) != virtq.MaxBurst {
		tb.Fatalf("reaped %d: %v", len(l.done), err)
	}
}

func benchBurst(b *testing.B, features uint64, reap, timed bool) {
	l := newBurstLoop(b, features, nil)
	l.reap, l.lean = reap, !reap
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		l.step(b, timed)
	}
	frames := float64(b.N * virtq.MaxBurst)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/frames, "ns/frame")
	if timed {
		b.ReportMetric(float64(l.device.Nanoseconds())/frames, "device-ns/frame")
	}
}

// BenchmarkPackedBurst32: see burstLoop; the lean driver, which does not
// reap, as in split's BenchmarkSplitBurst32. Reports ns per frame (ns/op /
// 32).
func BenchmarkPackedBurst32(b *testing.B) {
	benchBurst(b, fIndirect|fEventIdx, false, false)
}

// BenchmarkPackedBurst32InOrder: the same with IN_ORDER, where the whole
// burst costs one used descriptor.
func BenchmarkPackedBurst32InOrder(b *testing.B) {
	benchBurst(b, fIndirect|fEventIdx|fInOrder, false, false)
}

// BenchmarkPackedBurst32Reaped: the whole cycle, the driver reaping and
// checking every used descriptor; device-ns/frame is Pop+Push+NeedNotify
// alone (timed per burst, so it includes two clock reads per 32 frames).
func BenchmarkPackedBurst32Reaped(b *testing.B) {
	benchBurst(b, fIndirect|fEventIdx, true, true)
}

// TestZeroAllocs: no allocation per burst, for single, chained and indirect
// chains, with and without IN_ORDER, including the notification decision
// and kick toggling.
func TestZeroAllocs(t *testing.T) {
	chained := func(e *env) []drivertest.PackedBuf {
		return []drivertest.PackedBuf{{Addr: e.bufBase, Len: 12}, {Addr: e.bufBase + 64, Len: 1500}, {Addr: e.bufBase + 4096, Len: 1536, Write: true}}
	}
	cases := []struct {
		name     string
		features uint64
		chain    func(e *env) []drivertest.PackedBuf
		reap     bool
		lean     bool
	}{
		{name: "single", features: fIndirect | fEventIdx},
		{name: "single-lean", features: fIndirect | fEventIdx, lean: true},
		{name: "single-lean-inorder", features: fIndirect | fEventIdx | fInOrder, lean: true},
		{name: "single-reaped", features: fIndirect | fEventIdx, reap: true},
		{name: "single-inorder", features: fIndirect | fEventIdx | fInOrder, reap: true},
		{name: "chained", features: fEventIdx, chain: chained, reap: true},
		{name: "chained-inorder", features: fEventIdx | fInOrder, chain: chained},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l := newBurstLoop(t, tc.features, tc.chain)
			l.reap, l.lean = tc.reap, tc.lean
			l.step(t, false) // warm up
			if a := testing.AllocsPerRun(100, func() { l.step(t, false) }); a != 0 {
				t.Fatalf("%v allocations per burst", a)
			}
		})
	}
	t.Run("indirect", func(t *testing.T) {
		e := newEnv(t, benchRingSize, fIndirect|fEventIdx, 8<<20)
		bufs := chained(e)
		var used [virtq.MaxBurst]virtq.Used
		done := make([]drivertest.PackedCompletion, 0, benchRingSize)
		step := func() {
			for i := 0; i < virtq.MaxBurst; i++ {
				if _, err := e.d.AddIndirect(bufs); err != nil {
					t.Fatal(err)
				}
			}
			n, err := e.r.Pop(&e.b, virtq.MaxBurst)
			if n != virtq.MaxBurst || err != nil {
				t.Fatalf("Pop: %d, %v", n, err)
			}
			for i := 0; i < n; i++ {
				used[i] = virtq.Used{ID: e.b.Chains[i].ID, Descs: 1, Len: 100}
			}
			if err := e.r.Push(used[:n]); err != nil {
				t.Fatal(err)
			}
			e.r.NeedNotify()
			e.r.EnableKicks()
			e.r.DisableKicks()
			if done, err = e.d.Reap(done[:0]); err != nil || len(done) != n {
				t.Fatalf("reaped %d: %v", len(done), err)
			}
		}
		step()
		if a := testing.AllocsPerRun(100, step); a != 0 {
			t.Fatalf("%v allocations per burst", a)
		}
	})
}
