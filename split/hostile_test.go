package split_test

import (
	"errors"
	"testing"

	"github.com/xvswitch/xvswitch/split"
	"github.com/xvswitch/xvswitch/virtq"
	"github.com/xvswitch/xvswitch/virtq/drivertest"
)

// hostileRing is a small ring for hostile cases: descriptors 0 and 1 hold a
// valid chain (so a case can be placed behind it in the same burst), the
// rest is the case's to scribble on.
type hostileRing struct {
	m    *drivertest.Mem
	d    *drivertest.SplitDriver
	good uint64 // a 4 KiB data buffer in guest memory
	gap  uint64 // an address in no region
}

// newHostileRing returns a hostile ring of size and its device side, with
// a valid two-descriptor chain at head 0.
func newHostileRing(t *testing.T, size uint16, features uint64) (*hostileRing, *split.Ring) {
	t.Helper()
	m := newMem(t, 1<<20, 1<<20)
	h := &hostileRing{m: m, d: drivertest.NewSplitDriver(m, 0, size),
		good: m.Alloc(1, 4096, 64), gap: m.Regions[1].GuestAddr - 4096}
	r, err := split.New(h.d.Config(features))
	if err != nil {
		t.Fatal(err)
	}
	h.d.WriteDesc(0, h.good, 100, fN, 1)
	h.d.WriteDesc(1, h.good+100, 100, fW, 0)
	return h, r
}

// popHeadFirst pops the good chain at head 0 in a burst of its own and
// offers head 0 again behind it, so that the head is in flight from an
// earlier burst rather than the one that finds it again.
func (h *hostileRing) popHeadFirst(t *testing.T, r *split.Ring) {
	t.Helper()
	h.d.WriteAvail(0, 0)
	h.d.WriteAvail(1, 0)
	h.d.PublishIdx(1)
	var b virtq.Burst
	if n, err := r.Pop(&b, virtq.MaxBurst); n != 1 || err != nil {
		t.Fatalf("first pop: %d, %v", n, err)
	}
	h.d.PublishIdx(2)
}

// table writes an indirect table of entries into guest memory and returns
// its address.
func (h *hostileRing) table(entries ...[4]uint64) uint64 {
	a := h.m.Alloc(0, 16*uint64(len(entries))+16, 16)
	for i, e := range entries {
		putLE(h.m.Bytes(a+16*uint64(i), 16), e[0], uint32(e[1]), uint16(e[2]), uint16(e[3]))
	}
	return a
}

const (
	fN = drivertest.SplitFNext
	fW = drivertest.SplitFWrite
	fI = drivertest.SplitFIndirect
)

// TestHostile: each way a driver can break the ring returns the right
// sentinel (and ErrBroken), pops nothing, leaves the avail index where it
// was, and keeps the ring broken afterwards, whether the bad chain comes
// first in its burst or behind a good one.
func TestHostile(t *testing.T) {
	cases := hostileCases()
	for _, tc := range cases {
		for _, behind := range []bool{false, true} {
			name := tc.name
			if behind {
				name += "/behind a good chain"
			}
			t.Run(name, func(t *testing.T) {
				h, r := newHostileRing(t, tc.size, tc.features)
				n := uint16(0)
				if behind {
					h.d.WriteAvail(n, 0)
					n++
				}
				bad := tc.setup(h)
				if bad >= 0 {
					h.d.WriteAvail(n, uint16(bad))
					n++
					h.d.PublishIdx(n)
				}
				if tc.name == "head already in flight" && !behind {
					h.popHeadFirst(t, r)
				}
				b := new(virtq.Burst)
				if behind && tc.want == virtq.ErrChainTooLong {
					// A chain that runs the burst out of segments is left
					// for the next burst, where it is first and fails.
					if n, err := r.Pop(b, virtq.MaxBurst); n != 1 || err != nil || b.Chains[0].ID != 0 {
						t.Fatalf("pop of the good chain: %d, %v", n, err)
					}
				}
				before := r.State()
				inFlight := r.InFlight()
				got, err := r.Pop(b, virtq.MaxBurst)
				if !errors.Is(err, tc.want) || !errors.Is(err, virtq.ErrBroken) {
					t.Fatalf("Pop: %v, want %v and ErrBroken", err, tc.want)
				}
				if got != 0 || b.N != 0 || r.State() != before || r.InFlight() != inFlight {
					t.Fatalf("after error: popped %d (burst %d), State %d (was %d), InFlight %d (was %d)",
						got, b.N, r.State(), before, r.InFlight(), inFlight)
				}
				if r.Err() == nil {
					t.Fatal("Err() is nil on a broken ring")
				}
				// Broken for good, even once the driver repairs the ring.
				h.d.WriteDesc(2, h.good, 10, 0, 0)
				h.d.WriteAvail(0, 2)
				h.d.PublishIdx(1)
				if _, err := r.Pop(b, virtq.MaxBurst); !errors.Is(err, virtq.ErrBroken) {
					t.Fatalf("second Pop: %v, want ErrBroken", err)
				}
				if err := r.Push([]virtq.Used{{ID: 0}}); !errors.Is(err, virtq.ErrBroken) {
					t.Fatalf("Push on a broken ring: %v, want ErrBroken", err)
				}
				t.Log(err)
			})
		}
	}
}

// TestOversizedChain: a chain whose readable (or writable) bytes exceed
// what a uint32 total can hold is refused, even when every buffer is in
// guest memory. Needs a region over 4 GiB (mapped lazily, barely touched).
func TestOversizedChain(t *testing.T) {
	m, err := drivertest.NewMem(5 << 30)
	if err != nil {
		t.Skipf("cannot map 5 GiB of fake guest memory: %v", err)
	}
	t.Cleanup(m.Close)
	for _, flags := range []uint16{0, fW} {
		d := drivertest.NewSplitDriver(m, 0, 4)
		r, err := split.New(d.Config(featAll))
		if err != nil {
			t.Fatal(err)
		}
		buf := m.Regions[0].GuestAddr + 1<<20
		d.WriteDesc(0, buf, 3<<30, fN|flags, 1)
		d.WriteDesc(1, buf, 3<<30, flags, 0)
		d.WriteAvail(0, 0)
		d.PublishIdx(1)
		var b virtq.Burst
		if _, err := r.Pop(&b, 1); !errors.Is(err, virtq.ErrBadLength) {
			t.Fatalf("flags %d: Pop: %v, want ErrBadLength", flags, err)
		}
	}
}

// TestPushNotInFlight: completing an id that is not in flight (never
// popped, already pushed, out of range, or twice in one call) is refused
// without writing anything, and the ring stays usable.
func TestPushNotInFlight(t *testing.T) {
	m := newMem(t, 1<<20, 1<<20)
	d := drivertest.NewSplitDriver(m, 0, 8)
	h := newHarness(t, m, d, featAll, 256, 1)
	for i := 0; i < 3; i++ {
		h.add(shape{direct: []int{10, -10}})
	}
	h.d.Publish()
	h.pop(virtq.MaxBurst)
	ids := append([]uint16(nil), h.popped...)
	never := uint16(7) // heads 0..5 hold the three chains
	for _, bad := range [][]virtq.Used{
		{{ID: never}},
		{{ID: ids[0]}, {ID: 8}},
		{{ID: ids[0]}, {ID: 0xffff}},
		{{ID: ids[0]}, {ID: ids[1]}, {ID: ids[0]}},
	} {
		usedBefore := h.d.UsedIdx()
		if err := h.r.Push(bad); !errors.Is(err, virtq.ErrUsedNotInFlight) {
			t.Fatalf("Push(%v): %v, want ErrUsedNotInFlight", bad, err)
		}
		if h.d.UsedIdx() != usedBefore || h.r.InFlight() != 3 {
			t.Fatalf("Push(%v) failed but used idx %d (was %d), InFlight %d", bad, h.d.UsedIdx(), usedBefore, h.r.InFlight())
		}
	}
	h.complete(3, true)
	h.reap()
	if err := h.r.Push([]virtq.Used{{ID: ids[0]}}); !errors.Is(err, virtq.ErrUsedNotInFlight) {
		t.Fatalf("second Push of %d: %v, want ErrUsedNotInFlight", ids[0], err)
	}
	if h.r.Err() != nil {
		t.Fatalf("a device bug broke the ring: %v", h.r.Err())
	}
	h.add(shape{direct: []int{10}})
	h.d.Publish()
	h.drain()
}

// TestPushClampsLen: a used length beyond the chain's writable bytes (a
// switch bug) reaches the guest as the writable size, never more, for a
// single writable descriptor (the fast path), a chain and a readable-only
// chain.
func TestPushClampsLen(t *testing.T) {
	m := newMem(t, 1<<20, 1<<20)
	d := drivertest.NewSplitDriver(m, 0, 8)
	h := newHarness(t, m, d, featAll, 256, 1)
	h.add(shape{direct: []int{-100}})
	h.add(shape{direct: []int{10, -30, -40}})
	h.add(shape{direct: []int{20}})
	h.d.Publish()
	h.pop(virtq.MaxBurst)
	if len(h.popped) != 3 {
		t.Fatalf("popped %d chains, want 3", len(h.popped))
	}
	used := make([]virtq.Used, 3)
	for i, id := range h.popped {
		used[i] = virtq.Used{ID: id, Len: 5000}
	}
	if err := h.r.Push(used); err != nil {
		t.Fatal(err)
	}
	want := map[uint16]uint32{h.popped[0]: 100, h.popped[1]: 70, h.popped[2]: 0}
	for i := 0; i < 3; i++ {
		u, ok, err := h.d.Reap()
		if err != nil || !ok {
			t.Fatalf("reap %d: %v, %v", i, ok, err)
		}
		if u.Len != want[u.ID] {
			t.Errorf("id %d: used len %d, want %d", u.ID, u.Len, want[u.ID])
		}
	}
}

// hostileCase is one way a driver can break the ring (TestHostile).
type hostileCase struct {
	name     string
	size     uint16
	features uint64
	want     error
	// setup scribbles a bad chain and returns its head, or publishes
	// a bad avail idx itself and returns -1.
	setup func(h *hostileRing) int
}

func hostileCases() []hostileCase {
	return []hostileCase{
		{"avail idx beyond ring", 8, featAll, virtq.ErrBadIndex, func(h *hostileRing) int {
			h.d.PublishIdx(9)
			return -1
		}},
		{"avail idx far behind", 8, featAll, virtq.ErrBadIndex, func(h *hostileRing) int {
			h.d.PublishIdx(0xfff0)
			return -1
		}},
		{"head out of range", 8, featAll, virtq.ErrBadID, func(h *hostileRing) int { return 8 }},
		{"head 0xffff", 8, featAll, virtq.ErrBadID, func(h *hostileRing) int { return 0xffff }},
		{"head already in flight", 8, featAll, virtq.ErrBadID, func(h *hostileRing) int { return 0 }},
		{"next out of range", 8, featAll, virtq.ErrBadID, func(h *hostileRing) int {
			h.d.WriteDesc(2, h.good, 10, fN, 8)
			return 2
		}},
		{"self loop", 8, featAll, virtq.ErrLoop, func(h *hostileRing) int {
			h.d.WriteDesc(2, h.good, 10, fN, 2)
			return 2
		}},
		{"two-descriptor loop", 8, featAll, virtq.ErrLoop, func(h *hostileRing) int {
			h.d.WriteDesc(2, h.good, 10, fN, 3)
			h.d.WriteDesc(3, h.good, 10, fN, 2)
			return 2
		}},
		{"loop through the whole ring", 8, featAll, virtq.ErrLoop, func(h *hostileRing) int {
			for i := uint16(0); i < 8; i++ {
				h.d.WriteDesc(i, h.good, 10, fN, (i+1)%8)
			}
			return 2
		}},
		{"loop on a ring larger than the chain limit", 2048, featAll, virtq.ErrChainTooLong, func(h *hostileRing) int {
			h.d.WriteDesc(2, h.good, 10, fN, 3)
			h.d.WriteDesc(3, h.good, 10, fN, 2)
			return 2
		}},
		{"chain longer than MaxChainDescs", 2048, featAll, virtq.ErrChainTooLong, func(h *hostileRing) int {
			for i := uint16(2); i < 2+virtq.MaxChainDescs; i++ {
				h.d.WriteDesc(i, h.good, 1, fN, i+1)
			}
			h.d.WriteDesc(2+virtq.MaxChainDescs, h.good, 1, 0, 0)
			return 2
		}},
		{"address in a gap", 8, featAll, virtq.ErrBadAddress, func(h *hostileRing) int {
			h.d.WriteDesc(2, h.gap, 10, 0, 0)
			return 2
		}},
		{"buffer runs off its region", 8, featAll, virtq.ErrBadAddress, func(h *hostileRing) int {
			r := h.m.Regions[1]
			h.d.WriteDesc(2, r.GuestAddr+r.Size-8, 9, 0, 0)
			return 2
		}},
		{"address plus length wraps", 8, featAll, virtq.ErrBadAddress, func(h *hostileRing) int {
			h.d.WriteDesc(2, ^uint64(0)-4, 0xffff, fW, 0)
			return 2
		}},
		{"readable after writable", 8, featAll, virtq.ErrWriteBeforeRead, func(h *hostileRing) int {
			h.d.WriteDesc(2, h.good, 10, fN|fW, 3)
			h.d.WriteDesc(3, h.good, 10, 0, 0)
			return 2
		}},
		{"readable in indirect table after writable direct", 8, featAll, virtq.ErrWriteBeforeRead, func(h *hostileRing) int {
			h.d.WriteDesc(2, h.good, 10, fN|fW, 3)
			h.d.WriteDesc(3, h.table([4]uint64{h.good, 10, 0, 0}), 16, fI, 0)
			return 2
		}},
		{"indirect with NEXT", 8, featAll, virtq.ErrBadIndirect, func(h *hostileRing) int {
			h.d.WriteDesc(2, h.table([4]uint64{h.good, 10, 0, 0}), 16, fI|fN, 3)
			h.d.WriteDesc(3, h.good, 10, 0, 0)
			return 2
		}},
		{"indirect not negotiated", 8, featEventIdx, virtq.ErrBadIndirect, func(h *hostileRing) int {
			h.d.WriteDesc(2, h.table([4]uint64{h.good, 10, 0, 0}), 16, fI, 0)
			return 2
		}},
		{"indirect table of length 0", 8, featAll, virtq.ErrBadIndirect, func(h *hostileRing) int {
			h.d.WriteDesc(2, h.table([4]uint64{h.good, 10, 0, 0}), 0, fI, 0)
			return 2
		}},
		{"indirect table of length 24", 8, featAll, virtq.ErrBadIndirect, func(h *hostileRing) int {
			h.d.WriteDesc(2, h.table([4]uint64{h.good, 10, 0, 0}, [4]uint64{h.good, 10, 0, 0}), 24, fI, 0)
			return 2
		}},
		{"nested indirect", 8, featAll, virtq.ErrNestedIndirect, func(h *hostileRing) int {
			inner := h.table([4]uint64{h.good, 10, 0, 0})
			h.d.WriteDesc(2, h.table([4]uint64{h.good, 10, fN, 1}, [4]uint64{inner, 16, fI, 0}), 32, fI, 0)
			return 2
		}},
		{"indirect table in a gap", 8, featAll, virtq.ErrBadAddress, func(h *hostileRing) int {
			h.d.WriteDesc(2, h.gap, 64, fI, 0)
			return 2
		}},
		{"indirect table wraps the address space", 8, featAll, virtq.ErrBadAddress, func(h *hostileRing) int {
			h.d.WriteDesc(2, ^uint64(0)-15, 32, fI, 0)
			return 2
		}},
		{"indirect entry outside memory", 8, featAll, virtq.ErrBadAddress, func(h *hostileRing) int {
			h.d.WriteDesc(2, h.table([4]uint64{h.gap, 10, 0, 0}), 16, fI, 0)
			return 2
		}},
		{"indirect loop", 8, featAll, virtq.ErrLoop, func(h *hostileRing) int {
			h.d.WriteDesc(2, h.table([4]uint64{h.good, 10, fN, 1}, [4]uint64{h.good, 10, fN, 0}), 32, fI, 0)
			return 2
		}},
		{"indirect next out of table", 8, featAll, virtq.ErrBadIndirect, func(h *hostileRing) int {
			h.d.WriteDesc(2, h.table([4]uint64{h.good, 10, fN, 2}, [4]uint64{h.good, 10, 0, 0}), 32, fI, 0)
			return 2
		}},
		{"indirect chain longer than MaxChainDescs", 8, featAll, virtq.ErrChainTooLong, func(h *hostileRing) int {
			e := make([][4]uint64, virtq.MaxChainDescs+1)
			for i := range e {
				e[i] = [4]uint64{h.good, 1, fN, uint64(i + 1)}
			}
			e[len(e)-1][2] = 0
			h.d.WriteDesc(2, h.table(e...), uint32(16*len(e)), fI, 0)
			return 2
		}},
	}
}
