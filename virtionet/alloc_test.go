package virtionet

import (
	"math/rand"
	"testing"

	"github.com/xvswitch/xvswitch/virtq"
)

// The data path allocates nothing per frame or per burst. The guest posts
// enough buffers up front (AllocsPerRun's 101 runs of 32) so that the
// measured function is the queue's work alone.
const allocRing = 4096

func TestAllocsRx(t *testing.T) {
	for _, k := range kinds {
		for _, mrg := range []uint64{0, featMrg} {
			t.Run(k.String()+map[uint64]string{0: "", featMrg: "/mrg"}[mrg], func(t *testing.T) {
				g := newGuest(t, k, allocRing, 0)
				line, _ := callLine(t)
				q := NewRxQueue(g.ring, QueueConfig{Features: featV1 | mrg, Call: line})
				p := newPool(g, 2048, nil)
				g.refill(p, 2048, true)
				g.interrupts(true)
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
				if s := q.Snapshot(); s.Notifies == 0 {
					t.Fatal("the measured path never notified")
				}
			})
		}
	}
}

func TestAllocsTxToRx(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.String(), func(t *testing.T) {
			a := newGuest(t, k, allocRing, 0)
			b := newGuest(t, k, allocRing, 0)
			line, _ := callLine(t)
			tx := NewTxQueue(a.ring, QueueConfig{Index: 1, Features: featV1, Call: line})
			rx := NewRxQueue(b.ring, QueueConfig{Features: featV1 | featMrg, Call: line})
			src := frame(rand.New(rand.NewSource(1)), 1000)
			pa := newPool(a, HeaderLen+1000, func(m []byte) { copy(m[HeaderLen:], src) })
			pb := newPool(b, 2048, nil)
			a.refill(pa, HeaderLen+1000, false)
			b.refill(pb, 2048, true)
			a.interrupts(true)
			b.interrupts(true)
			allocs := testing.AllocsPerRun(100, func() {
				n, err := tx.Receive(virtq.MaxBurst)
				if n != virtq.MaxBurst || err != nil {
					t.Fatalf("Receive = %d, %v", n, err)
				}
				if d, err := rx.Deliver(tx.Frames()); d != n || err != nil {
					t.Fatalf("Deliver = %d, %v", d, err)
				}
				if err := tx.Complete(); err != nil {
					t.Fatal(err)
				}
			})
			if allocs != 0 {
				t.Fatalf("%v allocations per burst", allocs)
			}
		})
	}
}
