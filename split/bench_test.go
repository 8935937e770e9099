package split_test

import (
	"testing"
	"time"

	"github.com/xvswitch/xvswitch/split"
	"github.com/xvswitch/xvswitch/virtq"
	"github.com/xvswitch/xvswitch/virtq/drivertest"
)

// burstLoop is the shape shared by BenchmarkSplitBurst32 and the allocation
// tests (and mirrored by packed's BenchmarkPackedBurst32): a ring of 256
// descriptors, each a chain the driver set up once; per iteration the
// driver makes 32 chains available the way a driver must (writes their avail
// entries, publishes avail idx with a release store) and the device pops
// the burst of 32, pushes 32 used entries and decides once whether to
// notify. Used entries are not reaped: the driver model only needs the
// heads back, which it already knows. packed's BenchmarkPackedBurst32 has
// its driver do the same (its postLean), plus what the packed format
// needs: each descriptor written whole, where split writes 2-byte avail
// entries. BenchmarkSplitBurst32Timed adds device-ns/frame (Pop+Push+
// NeedNotify alone, timed with two clock reads per burst, as packed's
// BenchmarkPackedBurst32Reaped does).
type burstLoop struct {
	d      *drivertest.SplitDriver
	r      *split.Ring
	b      *virtq.Burst
	used   [virtq.MaxBurst]virtq.Used
	next   uint16
	device time.Duration
}

const benchRingSize = 256

// newBurstLoop builds the ring; chain(i) writes the chain whose head is
// descriptor i (it may use descriptor i and, for longer direct chains,
// the ones after it).
func newBurstLoop(tb testing.TB, m *drivertest.Mem, features uint64, chain func(d *drivertest.SplitDriver, head uint16)) *burstLoop {
	d := drivertest.NewSplitDriver(m, 0, benchRingSize)
	for i := uint16(0); i < benchRingSize; i++ {
		chain(d, i)
	}
	r, err := split.New(d.Config(features))
	if err != nil {
		tb.Fatal(err)
	}
	return &burstLoop{d: d, r: r, b: new(virtq.Burst)}
}

func (l *burstLoop) step(tb testing.TB, stride uint16, timed bool) {
	for i := uint16(0); i < virtq.MaxBurst; i++ {
		l.d.WriteAvail(l.next+i, (l.next+i)*stride%benchRingSize)
	}
	l.next += virtq.MaxBurst
	l.d.PublishIdx(l.next)
	var t0 time.Time
	if timed {
		t0 = time.Now()
	}
	n, err := l.r.Pop(l.b, virtq.MaxBurst)
	if n != virtq.MaxBurst || err != nil {
		tb.Fatalf("Pop: %d, %v", n, err)
	}
	for i := 0; i < n; i++ {
		c := &l.b.Chains[i]
		l.used[i] = virtq.Used{ID: c.ID, Descs: c.Descs, Len: c.WriteLen}
	}
	if err := l.r.Push(l.used[:n]); err != nil {
		tb.Fatal(err)
	}
	l.r.NeedNotify()
	if timed {
		l.device += time.Since(t0)
	}
}

func singleDesc(m *drivertest.Mem) func(*drivertest.SplitDriver, uint16) {
	return func(d *drivertest.SplitDriver, head uint16) {
		d.WriteDesc(head, m.Alloc(1, 1536, 64), 1500, 0, 0)
	}
}

// BenchmarkSplitBurst32: see burstLoop. Reports ns per frame for the whole
// loop (ns/op / 32). Untimed steps, as packed's BenchmarkPackedBurst32: the
// two clock reads per burst of the timed ones are not the ring's work.
func BenchmarkSplitBurst32(b *testing.B) {
	benchSplitBurst(b, false)
}

// BenchmarkSplitBurst32Timed: the same, also reporting device-ns/frame for
// the device side alone (two clock reads per burst of 32).
func BenchmarkSplitBurst32Timed(b *testing.B) {
	benchSplitBurst(b, true)
}

func benchSplitBurst(b *testing.B, timed bool) {
	m := newMem(b, 4<<20, 4<<20)
	l := newBurstLoop(b, m, featAll, singleDesc(m))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		l.step(b, 1, timed)
	}
	frames := float64(b.N * virtq.MaxBurst)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/frames, "ns/frame")
	if timed {
		b.ReportMetric(float64(l.device.Nanoseconds())/frames, "device-ns/frame")
	}
}

// TestZeroAllocs: no allocation per burst on the fast path, nor for chained
// and indirect chains, notification decisions and kick toggling.
func TestZeroAllocs(t *testing.T) {
	m := newMem(t, 4<<20, 8<<20)
	cases := map[string]struct {
		features uint64
		chain    func(d *drivertest.SplitDriver, head uint16)
		stride   uint16
	}{
		"single":             {featAll, singleDesc(m), 1},
		"single-no-eventidx": {featIndirect, singleDesc(m), 1},
		// Even heads: a header, a readable and a writable descriptor.
		"chained": {featAll, func(d *drivertest.SplitDriver, head uint16) {
			if head%4 != 0 {
				return
			}
			d.WriteDesc(head, m.Alloc(1, 16, 16), 12, drivertest.SplitFNext, head+1)
			d.WriteDesc(head+1, m.Alloc(1, 1536, 64), 1500, drivertest.SplitFNext, head+2)
			d.WriteDesc(head+2, m.Alloc(1, 1536, 64), 1536, drivertest.SplitFWrite, 0)
		}, 4},
		"indirect": {featAll, func(d *drivertest.SplitDriver, head uint16) {
			tbl := m.Alloc(0, 48, 16)
			putLE(m.Bytes(tbl, 16), m.Alloc(1, 16, 16), 12, drivertest.SplitFNext, 1)
			putLE(m.Bytes(tbl+16, 16), m.Alloc(1, 1536, 64), 1500, drivertest.SplitFNext, 2)
			putLE(m.Bytes(tbl+32, 16), m.Alloc(1, 1536, 64), 1536, drivertest.SplitFWrite, 0)
			d.WriteDesc(head, tbl, 48, drivertest.SplitFIndirect, 0)
		}, 1},
	}
	for name, tc := range cases {
		l := newBurstLoop(t, m, tc.features, tc.chain)
		l.step(t, tc.stride, false)
		allocs := testing.AllocsPerRun(200, func() {
			l.step(t, tc.stride, false)
			l.r.EnableKicks()
			l.r.DisableKicks()
		})
		if allocs != 0 {
			t.Errorf("%s: %v allocations per burst, want 0", name, allocs)
		}
		if l.r.InFlight() != 0 || l.d.UsedIdx() != l.next {
			t.Errorf("%s: InFlight %d, used idx %d, want 0 and %d", name, l.r.InFlight(), l.d.UsedIdx(), l.next)
		}
	}
}
