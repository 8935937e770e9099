package packed_test

import (
	"testing"

	"github.com/xvswitch/xvswitch/virtq"
	"github.com/xvswitch/xvswitch/virtq/drivertest"
)

// TestInOrderBatch checks what IN_ORDER buys: a run of buffers costs one
// used descriptor carrying the last id, placed where the first buffer's
// used descriptor would go; a run ends at a buffer the device did not fill
// completely (the driver takes skipped buffers as fully used), and at the
// end of each Push.
func TestInOrderBatch(t *testing.T) {
	cases := []struct {
		name      string
		write     bool    // receive-style chains (one writable buffer)
		lens      []int   // used lengths, -1 for "all of it"
		pushes    [][]int // index ranges per Push call
		wantDescs int
	}{
		{name: "transmit burst", lens: rep(32, 0), pushes: [][]int{{0, 32}}, wantDescs: 1},
		{name: "transmit in two pushes", lens: rep(32, 0), pushes: [][]int{{0, 10}, {10, 32}}, wantDescs: 2},
		{name: "receive, all full", write: true, lens: rep(20, -1), pushes: [][]int{{0, 20}}, wantDescs: 1},
		{name: "receive, last short", write: true, lens: append(rep(19, -1), 5), pushes: [][]int{{0, 20}}, wantDescs: 1},
		{name: "receive, some short", write: true, lens: []int{-1, 5, -1, -1, 0, -1, 7, -1}, pushes: [][]int{{0, 8}}, wantDescs: 4},
		{name: "receive, all short", write: true, lens: rep(6, 3), pushes: [][]int{{0, 6}}, wantDescs: 6},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, 64, fInOrder|fEventIdx, 1<<20)
			const bufLen = 100
			var ids []uint16
			for i := range tc.lens {
				// Chains of 1 or 2 slots, to check the skip counts slots.
				bufs := []drivertest.PackedBuf{{Addr: e.bufBase + uint64(i)*2*bufLen, Len: bufLen, Write: tc.write}}
				if i%3 == 1 {
					bufs = append([]drivertest.PackedBuf{{Addr: e.bufBase + uint64(i)*2*bufLen + bufLen, Len: 14}}, bufs...)
				}
				ids = append(ids, mustAdd(e, bufs))
			}
			var used []virtq.Used
			for len(used) < len(tc.lens) {
				n := e.pop(virtq.MaxBurst)
				for i := 0; i < n; i++ {
					c := e.b.Chains[i]
					if c.ID != ids[len(used)] {
						t.Fatalf("popped id %d, want %d", c.ID, ids[len(used)])
					}
					l := uint32(tc.lens[len(used)])
					if tc.lens[len(used)] < 0 {
						l = c.WriteLen
					}
					used = append(used, virtq.Used{ID: c.ID, Descs: c.Descs, Len: l})
				}
			}
			before, _ := e.d.NextUsed()
			for _, p := range tc.pushes {
				if err := e.r.Push(used[p[0]:p[1]]); err != nil {
					t.Fatal(err)
				}
			}
			got, err := e.d.Reap(nil)
			if err != nil {
				t.Fatal(err)
			}
			if e.d.UsedDescs != tc.wantDescs {
				t.Fatalf("%d used descriptors written, want %d", e.d.UsedDescs, tc.wantDescs)
			}
			if len(got) != len(used) {
				t.Fatalf("reaped %d buffers, pushed %d", len(got), len(used))
			}
			slots := 0
			for i, c := range got {
				if c.ID != used[i].ID || c.Len != used[i].Len {
					t.Fatalf("buffer %d: reaped id %d len %d, pushed id %d len %d", i, c.ID, c.Len, used[i].ID, used[i].Len)
				}
				slots += int(c.Slots)
			}
			after, _ := e.d.NextUsed()
			if int(after-before) != slots || e.r.InFlight() != 0 {
				t.Fatalf("used index moved %d slots for %d; ring in flight %d", after-before, slots, e.r.InFlight())
			}
		})
	}
}

func rep(n, v int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = v
	}
	return s
}
