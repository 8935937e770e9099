package virtionet

import (
	"math/rand"
	"testing"

	"github.com/xvswitch/xvswitch/virtq"
)

// TestTxHold: held chains stay in flight past Complete and become used by
// ID, out of order, when CompleteHeld says so; AbandonHeld returns the
// rest at the next call; a Reset that finds some forgets and counts them.
func TestTxHold(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.String(), func(t *testing.T) {
			g := newGuest(t, k, 256, 0)
			q := NewTxQueue(g.ring, QueueConfig{Index: 1, Features: featV1})
			rng := rand.New(rand.NewSource(1))
			var sent []uint16
			for i := 0; i < 8; i++ {
				sent = append(sent, g.send(frame(rng, 60+i), HeaderLen, hdrCombined))
			}
			if n, err := q.Receive(virtq.MaxBurst); n != 8 || err != nil {
				t.Fatalf("Receive: %d %v", n, err)
			}
			var held []uint16
			for _, i := range []int{1, 4, 6} {
				id, ok := q.Hold(i)
				if !ok || id != sent[i] {
					t.Fatalf("Hold(%d): %d %v, want id %d", i, id, ok, sent[i])
				}
				held = append(held, id)
			}
			if _, ok := q.Hold(4); ok {
				t.Fatal("a frame held twice")
			}
			if _, ok := q.Hold(8); ok {
				t.Fatal("Hold beyond the burst")
			}
			if err := q.Complete(); err != nil {
				t.Fatal(err)
			}
			if _, ok := q.Hold(0); ok {
				t.Fatal("Hold after Complete")
			}
			got := g.reap()
			if len(got) != 5 || g.ring.InFlight() != 3 || q.Held() != 3 {
				t.Fatalf("used %d, in flight %d, held %d; want 5, 3, 3", len(got), g.ring.InFlight(), q.Held())
			}
			for _, c := range got {
				for _, h := range held {
					if c.id == h {
						t.Fatalf("held chain %d used at Complete", h)
					}
				}
			}
			// Out of order, with an unknown ID and a repeat skipped.
			if n, err := q.CompleteHeld([]uint16{held[2], 999, held[0], held[2]}); n != 2 || err != nil {
				t.Fatalf("CompleteHeld: %d %v", n, err)
			}
			got = g.reap()
			if len(got) != 2 || got[0].id != held[2] || got[1].id != held[0] || got[0].n != 0 {
				t.Fatalf("used %+v, want %d then %d with length 0", got, held[2], held[0])
			}
			// Abandoned: the next call returns the last one.
			q.AbandonHeld()
			if n, _ := q.Receive(virtq.MaxBurst); n != 0 {
				t.Fatalf("Receive on an empty ring: %d", n)
			}
			got = g.reap()
			if len(got) != 1 || got[0].id != held[1] || g.ring.InFlight() != 0 || q.Held() != 0 {
				t.Fatalf("abandon returned %+v, in flight %d", got, g.ring.InFlight())
			}
			// A Reset with chains held and nobody abandoning them.
			g.send(frame(rng, 60), HeaderLen, hdrCombined)
			q.Receive(virtq.MaxBurst)
			q.Hold(0)
			q.Complete()
			q.Reset(nil)
			if q.HeldLost() != 1 || q.Held() != 0 {
				t.Fatalf("HeldLost %d held %d after a Reset", q.HeldLost(), q.Held())
			}
		})
	}
}

// TestTxHoldTwice: a guest making a held chain's ID available again
// breaks its queue, and nothing is pushed for it.
func TestTxHoldTwice(t *testing.T) {
	r := &fakeRing{}
	q := NewTxQueue(r, QueueConfig{Index: 1, Features: featV1})
	hdr := make([]byte, HeaderLen)
	fr := make([]byte, 60)
	r.add([][]byte{append(hdr, fr...)}, nil)
	q.Receive(virtq.MaxBurst)
	id, ok := q.Hold(0)
	if !ok {
		t.Fatal("Hold")
	}
	q.Complete()
	r.nextID = id // the guest reuses the held ID
	r.add([][]byte{append(hdr, fr...)}, nil)
	q.Receive(virtq.MaxBurst)
	if _, ok := q.Hold(0); ok || q.Err() == nil {
		t.Fatalf("held twice: ok %v err %v", ok, q.Err())
	}
}

func TestTxHoldAllocs(t *testing.T) {
	for _, k := range kinds {
		g := newGuest(t, k, allocRing, 0)
		q := NewTxQueue(g.ring, QueueConfig{Index: 1, Features: featV1})
		src := frame(rand.New(rand.NewSource(2)), 1000)
		p := newPool(g, HeaderLen+1000, func(m []byte) { copy(m[HeaderLen:], src) })
		g.refill(p, HeaderLen+1000, false)
		ids := make([]uint16, 0, virtq.MaxBurst)
		round := func() {
			n, _ := q.Receive(virtq.MaxBurst)
			if n != virtq.MaxBurst {
				t.Fatalf("Receive = %d", n)
			}
			ids = ids[:0]
			for i := 0; i < n; i += 2 {
				id, _ := q.Hold(i)
				ids = append(ids, id)
			}
			q.Complete()
			q.CompleteHeld(ids)
		}
		round() // the held table grows to the ring's IDs in the first rounds
		if a := testing.AllocsPerRun(50, round); a != 0 {
			t.Fatalf("%v: %v allocations per burst", k, a)
		}
	}
}
