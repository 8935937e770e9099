package virtionet

import (
	"fmt"
	"math/rand"
	"testing"

	"github.com/xvswitch/xvswitch/packed"
	"github.com/xvswitch/xvswitch/split"
	"github.com/xvswitch/xvswitch/virtq"
	"github.com/xvswitch/xvswitch/virtq/drivertest"
)

// newLoggedGuest is newGuest with the ring over memory whose writes are
// logged, as while the guest migrates.
func newLoggedGuest(t testing.TB, kind ringKind, size uint16) (*guest, *drivertest.Log) {
	t.Helper()
	m, err := drivertest.NewMem(1<<20, 64<<20)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	log := drivertest.NewLog(m)
	g := &guest{t: t, kind: kind, m: m, chains: map[uint16][]buf{}, free: map[uint32][]uint64{}}
	switch kind {
	case kindPacked:
		g.pk = drivertest.NewPackedDriver(m, 0, size)
		g.scratch = make([]drivertest.PackedCompletion, 0, size)
		cfg := g.pk.Config(featV1 | 1<<virtq.FeatureRingPacked)
		cfg.Mem = log.Logged(m)
		r, err := packed.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		g.ring = r
	case kindSplit:
		g.sp = drivertest.NewSplitDriver(m, 0, size)
		cfg := g.sp.Config(featV1)
		cfg.Mem = log.Logged(m)
		r, err := split.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		g.ring = r
	}
	return g, log
}

// While the guest migrates, delivering still allocates nothing, and
// marks what it wrote.
func TestAllocsRxLogged(t *testing.T) {
	for _, k := range kinds {
		for _, mrg := range []uint64{0, featMrg} {
			t.Run(k.String()+map[uint64]string{0: "", featMrg: "/mrg"}[mrg], func(t *testing.T) {
				g, log := newLoggedGuest(t, k, allocRing)
				q := NewRxQueue(g.ring, QueueConfig{Features: featV1 | mrg})
				p := newPool(g, 2048, nil)
				g.refill(p, 2048, true)
				f := &Frames{}
				for f.AddBytes(frame(rand.New(rand.NewSource(1)), 1000)) {
				}
				a := testing.AllocsPerRun(100, func() {
					if n, err := q.Deliver(f); n != virtq.MaxBurst || err != nil {
						t.Fatalf("Deliver = %d, %v", n, err)
					}
				})
				if a != 0 {
					t.Fatalf("%v allocations per burst", a)
				}
				for _, gpa := range p.addr {
					if !log.Dirty(gpa) {
						t.Fatalf("buffer %#x written, its page not marked", gpa)
					}
				}
			})
		}
	}
}

// BenchmarkRxBurst32Logged is BenchmarkRxBurst32's 1500-byte case while
// the guest migrates: what marking the buffers and used entries costs.
func BenchmarkRxBurst32Logged(b *testing.B) {
	for _, k := range kinds {
		b.Run(fmt.Sprint(k), func(b *testing.B) {
			g, _ := newLoggedGuest(b, k, benchRing)
			q := NewRxQueue(g.ring, QueueConfig{Features: featV1 | featMrg})
			p := newPool(g, 2048, nil)
			f := &Frames{}
			for f.AddBytes(frame(rand.New(rand.NewSource(1)), 1500)) {
			}
			avail := 0
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if avail < virtq.MaxBurst {
					b.StopTimer()
					avail = g.refill(p, 2048, true)
					b.StartTimer()
				}
				if n, err := q.Deliver(f); n != virtq.MaxBurst || err != nil {
					b.Fatalf("Deliver = %d, %v", n, err)
				}
				avail -= virtq.MaxBurst
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*virtq.MaxBurst), "ns/frame")
		})
	}
}
