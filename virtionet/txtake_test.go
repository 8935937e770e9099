package virtionet

import (
	"bytes"
	"math/rand"
	"testing"

	"github.com/xvswitch/xvswitch/virtq"
)

// TestTxTakeThenPop: a burst the ring's Take starts (single buffers) and
// Pop finishes (from the first chain of more descriptors on): the frames
// come out whole and in the order sent, each Hold names its own chain on
// either side of the seam, and every chain goes back once with length 0.
func TestTxTakeThenPop(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.String(), func(t *testing.T) {
			g := newGuest(t, k, 256, 0)
			q := NewTxQueue(g.ring, QueueConfig{Index: 1, Features: featV1})
			if q.taker == nil {
				t.Fatalf("%v ring has no Take", k)
			}
			rng := rand.New(rand.NewSource(3))
			order := []txLayout{hdrCombined, hdrCombined, hdrOwnDesc, hdrCombined, frameScatter, hdrCombined}
			var sent [][]byte
			var ids []uint16
			for _, l := range order {
				fr := frame(rng, 60+rng.Intn(200))
				sent = append(sent, fr)
				ids = append(ids, g.send(fr, HeaderLen, l))
			}
			n, err := q.Receive(virtq.MaxBurst)
			if n != len(order) || err != nil {
				t.Fatalf("Receive: %d, %v; want %d", n, err, len(order))
			}
			f := q.Frames()
			for i := range sent {
				if got := gather(f, i); !bytes.Equal(got, sent[i]) || f.FrameLen(i) != len(sent[i]) {
					t.Fatalf("frame %d (%v): %d bytes, want %d", i, order[i], len(got), len(sent[i]))
				}
			}
			held := map[uint16]bool{}
			for _, i := range []int{1, 2, 3} { // taken, the chain that stopped Take, popped after it
				id, ok := q.Hold(i)
				if !ok || id != ids[i] {
					t.Fatalf("Hold(%d): id %d (%v), want %d", i, id, ok, ids[i])
				}
				held[id] = true
			}
			if err := q.Complete(); err != nil {
				t.Fatal(err)
			}
			got := g.reap()
			if len(got) != len(order)-len(held) || g.ring.InFlight() != len(held) {
				t.Fatalf("used %d at Complete, %d in flight; want %d, %d", len(got), g.ring.InFlight(), len(order)-len(held), len(held))
			}
			for _, c := range got {
				if held[c.id] || c.n != 0 {
					t.Fatalf("used %+v at Complete", c)
				}
			}
			if n, err := q.CompleteHeld([]uint16{ids[3], ids[1], ids[2]}); n != 3 || err != nil {
				t.Fatalf("CompleteHeld: %d, %v", n, err)
			}
			if got = g.reap(); len(got) != 3 || got[0].id != ids[3] || got[1].id != ids[1] || got[2].id != ids[2] || g.ring.InFlight() != 0 {
				t.Fatalf("used %+v after CompleteHeld, %d in flight", got, g.ring.InFlight())
			}
			if s := q.Snapshot(); s.Packets != uint64(len(order)) || s.Dropped() != 0 {
				t.Fatalf("stats %+v, want %d packets", s, len(order))
			}
		})
	}
}
