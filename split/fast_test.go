package split_test

import (
	"errors"
	"testing"

	"github.com/xvswitch/xvswitch/split"
	"github.com/xvswitch/xvswitch/virtq"
	"github.com/xvswitch/xvswitch/virtq/drivertest"
)

// TestHostileGroup: bad heads among avail entries read four at a time
// (fast.go) fail as they do one at a time: the right sentinel, nothing
// popped, the avail index where it was, the ring broken.
func TestHostileGroup(t *testing.T) {
	cases := []struct {
		name  string
		heads []uint16
		first []uint16 // popped in an earlier burst
		bad   func(d *drivertest.SplitDriver, m *drivertest.Mem)
		want  error
	}{
		{name: "head twice in a group", heads: []uint16{0, 1, 0, 3}, want: virtq.ErrBadID},
		{name: "head out of range in a group", heads: []uint16{0, 1, 8, 3}, want: virtq.ErrBadID},
		{name: "head 0xffff in a group", heads: []uint16{0, 0xffff, 2, 3}, want: virtq.ErrBadID},
		{name: "head in flight from the burst before", first: []uint16{4, 5, 6, 7}, heads: []uint16{0, 1, 6, 3}, want: virtq.ErrBadID},
		{name: "buffer outside memory in a group", heads: []uint16{0, 1, 2, 3}, want: virtq.ErrBadAddress,
			bad: func(d *drivertest.SplitDriver, m *drivertest.Mem) {
				d.WriteDesc(2, m.Regions[1].GuestAddr+m.Regions[1].Size-8, 64, drivertest.SplitFWrite, 0)
			}},
		{name: "length beyond the region in a group", heads: []uint16{0, 1, 2, 3}, want: virtq.ErrBadAddress,
			bad: func(d *drivertest.SplitDriver, m *drivertest.Mem) {
				d.WriteDesc(3, m.Regions[1].GuestAddr, 0xffffffff, 0, 0)
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := newMem(t, 1<<20, 1<<20)
			d := drivertest.NewSplitDriver(m, 0, 8)
			for i := uint16(0); i < 8; i++ {
				d.WriteDesc(i, m.Alloc(1, 2048, 64), 2048, drivertest.SplitFWrite, 0)
			}
			if tc.bad != nil {
				tc.bad(d, m)
			}
			r, err := split.New(d.Config(featAll))
			if err != nil {
				t.Fatal(err)
			}
			b := new(virtq.Burst)
			n := uint16(0)
			for _, h := range tc.first {
				d.WriteAvail(n, h)
				n++
			}
			if n > 0 {
				d.PublishIdx(n)
				if got, err := r.Pop(b, virtq.MaxBurst); got != int(n) || err != nil {
					t.Fatalf("first burst: %d, %v", got, err)
				}
			}
			for _, h := range tc.heads {
				d.WriteAvail(n, h)
				n++
			}
			d.PublishIdx(n)
			before, inFlight := r.State(), r.InFlight()
			got, err := r.Pop(b, virtq.MaxBurst)
			if !errors.Is(err, tc.want) || !errors.Is(err, virtq.ErrBroken) {
				t.Fatalf("Pop: %v, want %v", err, tc.want)
			}
			if got != 0 || b.N != 0 || r.State() != before || r.InFlight() != inFlight {
				t.Fatalf("failed Pop popped %d, state %d -> %d, in flight %d -> %d", got, before, r.State(), inFlight, r.InFlight())
			}
			if _, err := r.Pop(b, virtq.MaxBurst); !errors.Is(err, virtq.ErrBroken) {
				t.Fatalf("Pop after failure: %v", err)
			}
		})
	}
}
