package packed_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"

	"github.com/xvswitch/xvswitch/packed"
	"github.com/xvswitch/xvswitch/virtq/drivertest"
)

func ones(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = 1
	}
	return s
}

// TestResumeAfterFrontEndDrops: a device dies with chains pending on a
// guest's transmit ring; the front-end, serving the ring itself meanwhile,
// drops a run of chains from its stale position, which lies after the
// pending ones, and sends the next device its position after them (the
// ring CI's restart test once left stopped). The next device must drop
// the chains before the front-end's run too, then go on at the base: the
// driver reaps every pending chain, the front-end's and (when the dead
// device died in the middle of a Push) the torn batch, each once, and the
// ring carries on in order.
func TestResumeAfterFrontEndDrops(t *testing.T) {
	cases := []struct {
		name string
		size uint16
		laps int
		torn bool  // the dead device died publishing a batch of 3 first
		a    []int // chains pending before the front-end's run, by descriptors
		held int   // of those, popped by the dead device and not used
		h, p int   // chains the front-end dropped (of one descriptor), chains added after
	}{
		{"as-in-ci", 256, 1, false, ones(23), 0, 1, 3},
		{"one-pending", 16, 2, false, ones(1), 0, 2, 1},
		{"chains-pending", 16, 3, false, []int{2, 1, 3}, 0, 3, 2},
		{"some-held", 16, 1, false, []int{1, 2, 1, 1}, 2, 2, 0},
		{"all-held", 16, 2, false, []int{1, 1, 1}, 3, 4, 2},
		{"after-a-torn-batch", 16, 2, true, []int{1, 2}, 1, 2, 1},
		{"ring-of-3", 3, 4, false, ones(1), 0, 1, 0},
		{"nothing-pending-after", 8, 5, false, []int{3}, 0, 5, 0},
	}
	for _, tc := range cases {
		for start := 0; start < int(tc.size); start += max(1, int(tc.size)/5) {
			t.Run(fmt.Sprintf("%s/start=%d", tc.name, start), func(t *testing.T) {
				r := newResumer(t, tc.size, 0, false)
				r.cfg.ReadOnly = true
				r.traffic(tc.laps)
				r.drain()
				// Shift where the story happens on the ring.
				for i := 0; i < start; i++ {
					r.add(1)
					r.pop(1)
					r.push(1)
					r.reap()
				}
				reaps := 0
				if tc.torn {
					r.add(1, 1, 1)
					r.pop(3)
					r.pushTorn(3)
					reaps += 3
				}
				r.add(tc.a...)
				if tc.held > 0 && r.pop(tc.held) != tc.held {
					t.Fatalf("the dead device popped fewer than %d", tc.held)
				}
				stale, staleWrap := r.d.NextAvail()
				r.add(ones(tc.h)...)
				at, atWrap, dropped := r.d.FrontEndDrops(stale, staleWrap)
				if dropped != tc.h {
					t.Fatalf("the front-end dropped %d chains, want %d", dropped, tc.h)
				}
				for id, s := range r.serial {
					if s >= r.next-len(tc.a)-tc.h {
						r.lens[id] = 0 // dropped: used with length 0
					}
				}
				reaps += len(tc.a) + tc.h
				r.add(ones(tc.p)...)
				r.held = r.held[:0]
				r.popped = r.next - tc.p

				cfg := r.cfg
				cfg.Base = state(at, atWrap, at, atWrap)
				res, err := packed.Resume(cfg)
				want := packed.Resumed{Base: cfg.Base, Dropped: len(tc.a), Torn: tc.torn}
				if !tc.torn && len(tc.a) == 1 && tc.a[0] == 1 {
					// One chain of one slot before used ones reads as a
					// batch cut short, first: completed the same way.
					want.Dropped, want.Torn = 0, true
				}
				if err != nil || res != want {
					t.Fatalf("Resume from the front-end's %#x: %+v, %v; want %+v", cfg.Base, res, err, want)
				}
				if r.r, err = packed.New(cfg); err != nil {
					t.Fatal(err)
				}
				if n := r.reap(); n != reaps {
					t.Fatalf("the driver reaped %d chains, want %d", n, reaps)
				}
				r.traffic(2)
				r.drain()
			})
		}
	}
}

// TestResumeFrontEndDropsCannotTell: layouts like the one above that
// Resume must not complete, because the front-end cannot have made them
// or what it dropped is not known: it says it cannot tell and leaves the
// ring as it was.
func TestResumeFrontEndDropsCannotTell(t *testing.T) {
	cases := []struct {
		name     string
		features uint64
		rx       bool
		hChains  []int                  // the chains the front-end drops
		base     func(at uint32) uint32 // the base the next device gets
		lastNext bool                   // the last chain before the run reads NEXT into it
	}{
		// QEMU marks only the head of a chain it drops: the rest reads
		// as available inside its run.
		{"front-end-dropped-a-chain", 0, false, []int{1, 2, 1}, nil, false},
		// QEMU drops nothing on a receive ring.
		{"receive-ring", 0, true, []int{1, 1}, nil, false},
		{"in-order", fInOrder, false, []int{1, 1}, nil, false},
		// The run does not end where the base says.
		{"base-after-the-run", 0, false, []int{1, 1}, func(at uint32) uint32 { return at + 1 | (at+1)<<16 }, false},
		{"base-halves-differ", 0, false, []int{1, 1}, func(at uint32) uint32 { return at + 1 | at<<16 }, false},
		// Where the chains before the run end is not known.
		{"chain-into-the-run", 0, false, []int{1, 1}, nil, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := newResumer(t, 16, tc.features, tc.rx)
			r.cfg.ReadOnly = !tc.rx
			r.traffic(2)
			r.drain()
			r.add(1, 1, 1)
			stale, staleWrap := r.d.NextAvail()
			if tc.lastNext {
				o := (int(stale)+15)%16*16 + 14
				binary.LittleEndian.PutUint16(r.d.Desc()[o:], binary.LittleEndian.Uint16(r.d.Desc()[o:])|drivertest.PackedNext)
			}
			r.add(tc.hChains...)
			at, atWrap, _ := r.d.FrontEndDrops(stale, staleWrap)
			r.add(1)
			cfg := r.cfg
			cfg.Base = state(at, atWrap, at, atWrap)
			if tc.base != nil {
				cfg.Base = tc.base(uint32(at))
				if atWrap {
					cfg.Base |= 1<<15 | 1<<31
				}
			}
			before := append([]byte(nil), r.d.Desc()...)
			res, err := packed.Resume(cfg)
			if !errors.Is(err, packed.ErrPositionUnknown) || res.Base != cfg.Base || res.Dropped != 0 {
				t.Fatalf("Resume = %+v, %v; want the base back and ErrPositionUnknown", res, err)
			}
			if !bytes.Equal(before, r.d.Desc()) {
				t.Fatal("Resume could not tell, and wrote the ring")
			}
		})
	}
}
