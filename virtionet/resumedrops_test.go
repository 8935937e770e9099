package virtionet

import (
	"math/rand"
	"testing"

	"github.com/xvswitch/xvswitch/virtq"
)

// TestResumeDropsCounted: chains a ring's start dropped are counted once,
// as resume_dropped, in the next burst (where the switch reads them) and
// in the queue's published counters, with that burst's frames beside them;
// on a queue that has no ring yet too.
func TestResumeDropsCounted(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.String(), func(t *testing.T) {
			g := newGuest(t, k, 64, 0)
			q := NewTxQueue(nil, QueueConfig{Index: 1, Features: featV1})
			q.AddResumeDrops(0) // nothing to count
			q.AddResumeDrops(2)
			q.AddResumeDrops(1)
			if _, err := q.Receive(virtq.MaxBurst); err != nil {
				t.Fatal(err)
			}
			if d, last := q.LastBurstDrops(), q.LastBurst(); d == nil || d[DropResumeDropped] != 3 || last.Dropped() != 3 {
				t.Fatalf("stopped queue: last burst's drops %v, want 3 resume_dropped", d)
			}
			if s := q.Snapshot(); s.Drops[DropResumeDropped] != 3 {
				t.Fatalf("stopped queue: published %+v, want 3 resume_dropped", s)
			}

			q.Reset(g.ring)
			q.AddResumeDrops(4)
			rng := rand.New(rand.NewSource(1))
			for range 5 {
				g.send(frame(rng, 60), HeaderLen, hdrCombined)
			}
			n, err := q.Receive(virtq.MaxBurst)
			if err != nil || n != 5 {
				t.Fatalf("Receive: %d chains, %v; want 5", n, err)
			}
			last := q.LastBurst()
			if last.Packets != 5 || last.Drops[DropResumeDropped] != 4 || last.Dropped() != 4 {
				t.Fatalf("burst %+v: want 5 frames and 4 resume_dropped", last)
			}
			if err := q.Complete(); err != nil {
				t.Fatal(err)
			}
			if _, err := q.Receive(virtq.MaxBurst); err != nil {
				t.Fatal(err)
			}
			if d := q.LastBurstDrops(); d != nil {
				t.Fatalf("counted again in the next burst: %v", d)
			}
			if s := q.Snapshot(); s.Packets != 5 || s.Drops[DropResumeDropped] != 7 || s.Dropped() != 7 {
				t.Fatalf("published %+v, want 5 frames and 7 resume_dropped", s)
			}
		})
	}
}
