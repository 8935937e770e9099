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

// TestTxPlainAfterOffload: a burst whose frames ask for a checksum, then
// one of plain frames on the same queue: the plain frames carry no offload
// (the table's offloads of the last burst do not leak into a run the
// short way fills), and the table says it is plain.
func TestTxPlainAfterOffload(t *testing.T) {
	csum := Header{Flags: FlagNeedsCsum, CsumStart: 34, CsumOffset: 6}
	for _, k := range kinds {
		t.Run(k.String(), func(t *testing.T) {
			g := newGuest(t, k, 64, 0)
			q := NewTxQueue(g.ring, QueueConfig{Index: 1, Features: featV1 | featOffloads})
			rng := rand.New(rand.NewSource(5))
			for range 4 {
				g.sendWithHeader(csum, frame(rng, 60), hdrCombined)
			}
			if n, err := q.Receive(virtq.MaxBurst); n != 4 || err != nil {
				t.Fatalf("Receive: %d, %v", n, err)
			}
			if f := q.Frames(); f.Len() != 4 || f.Offload(3).IsZero() || f.Plain() {
				t.Fatalf("%d frames, offload %+v, plain %v: want 4 asking for a checksum", f.Len(), f.Offload(3), f.Plain())
			}
			if err := q.Complete(); err != nil {
				t.Fatal(err)
			}
			for range 4 {
				g.sendWithHeader(Header{}, frame(rng, 60), hdrCombined)
			}
			if n, err := q.Receive(virtq.MaxBurst); n != 4 || err != nil {
				t.Fatalf("Receive: %d, %v", n, err)
			}
			f := q.Frames()
			if f.Len() != 4 || !f.Plain() {
				t.Fatalf("%d frames, plain %v: want 4 plain", f.Len(), f.Plain())
			}
			for i := range 4 {
				if !f.Offload(i).IsZero() {
					t.Fatalf("plain frame %d carries offload %+v", i, f.Offload(i))
				}
			}
		})
	}
}
