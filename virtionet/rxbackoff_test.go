package virtionet

import (
	"math/rand"
	"testing"
	"time"
)

// TestRxBackoff: after a Deliver that ran out of buffers, Deliver leaves
// the ring alone for RxBackoff, counting its frames as no_rx_buffers, even
// once the guest has posted buffers; with no back-off configured the
// same sequence delivers them.
func TestRxBackoff(t *testing.T) {
	for _, k := range kinds {
		for _, span := range []time.Duration{0, time.Hour} {
			t.Run(k.String()+"/"+span.String(), func(t *testing.T) {
				g := newGuest(t, k, 256, 0)
				q := NewRxQueue(g.ring, QueueConfig{Features: featV1 | featMrg, RxBackoff: span})
				rng := rand.New(rand.NewSource(5))
				var fs [][]byte
				for i := 0; i < 4; i++ {
					fs = append(fs, frame(rng, 200))
				}
				// Two buffers for four frames: the ring runs dry.
				g.post(2048)
				g.post(2048)
				if n, err := q.Deliver(framesOf(fs...)); n != 2 || err != nil {
					t.Fatalf("Deliver = %d, %v", n, err)
				}
				for i := 0; i < 8; i++ {
					g.post(2048)
				}
				n, err := q.Deliver(framesOf(fs...))
				if err != nil {
					t.Fatal(err)
				}
				if span == 0 {
					if n != 4 {
						t.Fatalf("without a back-off: delivered %d, want 4", n)
					}
					checkReceived(t, g, true, append(fs[:2:2], fs...))
					checkStats(t, q.Snapshot(), 6, 1200, map[DropReason]int{DropNoRxBuffers: 2})
					return
				}
				if n != 0 {
					t.Fatalf("backing off: delivered %d, want 0", n)
				}
				// The guest's new buffers are untouched: none used, none
				// in flight.
				checkReceived(t, g, true, fs[:2])
				if g.ring.InFlight() != 0 || q.Held() != 0 {
					t.Fatalf("in flight %d, held %d: the ring was read", g.ring.InFlight(), q.Held())
				}
				checkStats(t, q.Snapshot(), 2, 400, map[DropReason]int{DropNoRxBuffers: 6})
				f := framesOf(fs...)
				if a := testing.AllocsPerRun(100, func() { _, _ = q.Deliver(f) }); a != 0 {
					t.Fatalf("a Deliver backing off allocates %v times", a)
				}
			})
		}
	}
}

// TestRxBackoffEnds: once RxBackoff has passed, Deliver reads the ring
// again and the buffers posted meanwhile take the frames.
func TestRxBackoffEnds(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.String(), func(t *testing.T) {
			const span = 2 * time.Millisecond
			g := newGuest(t, k, 256, 0)
			q := NewRxQueue(g.ring, QueueConfig{Features: featV1 | featMrg, RxBackoff: span})
			fr := frame(rand.New(rand.NewSource(6)), 100)
			if n, _ := q.Deliver(framesOf(fr)); n != 0 {
				t.Fatalf("an empty ring took %d frames", n)
			}
			g.post(2048)
			time.Sleep(2 * span)
			if n, err := q.Deliver(framesOf(fr)); n != 1 || err != nil {
				t.Fatalf("after the back-off: Deliver = %d, %v", n, err)
			}
			checkReceived(t, g, true, [][]byte{fr})
			checkStats(t, q.Snapshot(), 1, 100, map[DropReason]int{DropNoRxBuffers: 1})
		})
	}
}

// TestRxBackoffNotWhenFull: a Deliver whose frames all found buffers
// starts no back-off, even when it took the ring's last ones.
func TestRxBackoffNotWhenFull(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.String(), func(t *testing.T) {
			g := newGuest(t, k, 256, 0)
			q := NewRxQueue(g.ring, QueueConfig{Features: featV1 | featMrg, RxBackoff: time.Hour})
			rng := rand.New(rand.NewSource(7))
			var want [][]byte
			for round := 0; round < 3; round++ {
				fs := [][]byte{frame(rng, 300), frame(rng, 300)}
				g.post(2048)
				g.post(2048)
				if n, err := q.Deliver(framesOf(fs...)); n != 2 || err != nil {
					t.Fatalf("round %d: Deliver = %d, %v", round, n, err)
				}
				want = append(want, fs...)
			}
			checkReceived(t, g, true, want)
			checkStats(t, q.Snapshot(), 6, 1800, nil)
		})
	}
}
