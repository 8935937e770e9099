package split_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"

	"github.com/xvswitch/xvswitch/split"
	"github.com/xvswitch/xvswitch/virtq"
	"github.com/xvswitch/xvswitch/virtq/drivertest"
)

// TestSizesAndWrap runs every power-of-two ring size through several laps
// of the ring and across the 16-bit index wrap, with random burst sizes, a
// completely full ring at least once, and completion in reverse order.
func TestSizesAndWrap(t *testing.T) {
	for shift := 0; shift <= 15; shift++ {
		size := 1 << shift
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			m := newMem(t, 8<<20, 8<<20)
			// Start 1.5 rings (plus a little) before the 16-bit wrap so every
			// size crosses it.
			start := uint16(-(3*size/2 + 7))
			d := drivertest.NewSplitDriverAt(m, 0, uint16(size), start, 4)
			h := newHarness(t, m, d, featAll, 64, int64(size))
			if got := h.r.State(); got != uint32(start) {
				t.Fatalf("State %d, want %d", got, start)
			}
			total := 3*size + 300
			for h.added < total {
				// Fill the ring completely on the first lap, otherwise a
				// random amount.
				n := 1 + h.rng.Intn(2*virtq.MaxBurst)
				if h.added == 0 {
					n = size
				}
				for i := 0; i < n && h.add(oneBuf(h)); i++ {
				}
				if h.added == size && h.d.FreeDescs() != 0 {
					t.Fatalf("ring not full: %d free", h.d.FreeDescs())
				}
				h.d.Publish()
				for h.pop(1+h.rng.Intn(virtq.MaxBurst)) > 0 {
				}
				// Reverse order on the first lap, then in order.
				if h.completed == 0 {
					for i, j := 0, len(h.popped)-1; i < j; i, j = i+1, j-1 {
						h.popped[i], h.popped[j] = h.popped[j], h.popped[i]
					}
				}
				h.complete(len(h.popped), false)
				h.reap()
			}
			h.drain()
			wantIdx := start + uint16(h.added)
			if h.r.State() != uint32(wantIdx) || h.d.UsedIdx() != wantIdx {
				t.Fatalf("after %d chains from %d: State %d, used idx %d, want %d",
					h.added, start, h.r.State(), h.d.UsedIdx(), wantIdx)
			}
		})
	}
}

// oneBuf is a single-descriptor chain, readable or writable.
func oneBuf(h *harness) shape {
	l := 1 + h.rng.Intn(32)
	if h.rng.Intn(2) == 0 {
		l = -l
	}
	return shape{direct: []int{l}}
}

// TestManyWrapLaps crosses the 16-bit index wrap several times on small
// rings, where each lap of the index is thousands of laps of the ring.
func TestManyWrapLaps(t *testing.T) {
	for _, size := range []int{1, 4, 256} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			m := newMem(t, 8<<20, 8<<20)
			d := drivertest.NewSplitDriver(m, 0, uint16(size))
			h := newHarness(t, m, d, featAll, 64, 7)
			const laps = 3
			for h.added < laps*65536+size {
				for h.add(shape{direct: []int{8}}) {
				}
				h.d.Publish()
				for h.pop(virtq.MaxBurst) > 0 {
				}
				h.complete(len(h.popped), size > 1)
				h.reap()
			}
			h.drain()
			if want := uint16(h.added); h.r.State() != uint32(want) || h.d.UsedIdx() != want {
				t.Fatalf("State %d, used idx %d, want %d", h.r.State(), h.d.UsedIdx(), want)
			}
		})
	}
}

// TestRandomChains: random chain shapes (direct, indirect, direct with an
// indirect tail), random burst limits and out-of-order completion of random
// subsets, with every byte checked both ways.
func TestRandomChains(t *testing.T) {
	for _, tc := range []struct {
		size     int
		features uint64
	}{
		{8, featAll}, {64, featAll}, {256, featAll},
		{16, featEventIdx}, {128, 0},
	} {
		t.Run(fmt.Sprintf("size%d-feat%x", tc.size, tc.features>>28), func(t *testing.T) {
			m := newMem(t, 16<<20, 64<<20)
			d := drivertest.NewSplitDriverAt(m, 0, uint16(tc.size), uint16(65536-1000), 4)
			h := newHarness(t, m, d, tc.features, 4096, int64(tc.size))
			indirect := tc.features&featIndirect != 0
			for h.added < 6000 {
				for i := h.rng.Intn(40); i > 0; i-- {
					if !h.add(h.randShape(indirect)) {
						break
					}
				}
				h.d.Publish()
				for i := h.rng.Intn(4); i > 0; i-- {
					h.pop(1 + h.rng.Intn(virtq.MaxBurst))
				}
				h.complete(h.rng.Intn(len(h.popped)+1), true)
				if h.r.InFlight() != len(h.popped) {
					t.Fatalf("InFlight %d, harness holds %d", h.r.InFlight(), len(h.popped))
				}
				h.reap()
			}
			h.drain()
		})
	}
}

// TestBurstStopsWhenSegmentsRunOut: a chain whose segments do not fit in
// what is left of the burst is left for the next burst, not split or lost;
// one that could never fit fails the ring.
func TestBurstStopsWhenSegmentsRunOut(t *testing.T) {
	m, err := drivertest.NewAdjacentMem(64 << 20)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	boundary := m.Regions[1].GuestAddr
	d := drivertest.NewSplitDriver(m, 0, 2048)
	r, err := split.New(d.Config(featAll))
	if err != nil {
		t.Fatal(err)
	}
	// Each buffer straddles the two regions: two segments per descriptor.
	straddling := func(n int) []drivertest.SplitBuf {
		bufs := make([]drivertest.SplitBuf, n)
		for i := range bufs {
			bufs[i] = drivertest.SplitBuf{Addr: boundary - 4, Len: 8}
		}
		return bufs
	}
	a, _ := d.AddChain(straddling(300), nil) // 600 segments
	b, _ := d.AddChain(straddling(300), nil)
	d.Publish()
	var burst virtq.Burst
	for i, wantID := range []uint16{a, b} {
		n, err := r.Pop(&burst, virtq.MaxBurst)
		if err != nil || n != 1 || burst.Chains[0].ID != wantID || len(burst.Readable(0)) != 600 {
			t.Fatalf("pop %d: n=%d err=%v, want chain %d with 600 segments", i, n, err, wantID)
		}
	}
	if r.InFlight() != 2 || r.State() != 2 {
		t.Fatalf("InFlight %d State %d, want 2 and 2", r.InFlight(), r.State())
	}
	// 513 straddling descriptors = 1026 segments > MaxBurstSegs.
	d.AddChain(straddling(513), nil)
	d.Publish()
	if _, err := r.Pop(&burst, virtq.MaxBurst); !errors.Is(err, virtq.ErrChainTooLong) {
		t.Fatalf("Pop of a chain needing 1026 segments: %v, want ErrChainTooLong", err)
	}
}

// TestStraddlingBuffers: buffers and an indirect table that cross from one
// guest region into the next come back as two host segments holding the
// right bytes.
func TestStraddlingBuffers(t *testing.T) {
	m, err := drivertest.NewAdjacentMem(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	boundary := m.Regions[1].GuestAddr
	d := drivertest.NewSplitDriver(m, 0, 16)
	r, err := split.New(d.Config(featAll))
	if err != nil {
		t.Fatal(err)
	}
	for i := uint64(0); i < 300; i++ {
		m.Bytes(boundary-100+i, 1)[0] = byte(i + 1)
	}
	// The indirect table: three entries, the second straddling the
	// boundary (the table starts 24 bytes before it).
	table := boundary - 24
	readBuf := drivertest.SplitBuf{Addr: boundary - 100, Len: 300}
	writeBuf := drivertest.SplitBuf{Addr: boundary - 50, Len: 100, Write: true}
	direct := drivertest.SplitBuf{Addr: boundary - 10, Len: 20}
	entries := []drivertest.SplitBuf{readBuf, direct, writeBuf}
	var raw []byte
	for i, e := range entries {
		var ent [16]byte
		flags := uint16(0)
		if e.Write {
			flags |= drivertest.SplitFWrite
		}
		if i < 2 {
			flags |= drivertest.SplitFNext
		}
		putLE(ent[:], e.Addr, e.Len, flags, uint16(i+1))
		raw = append(raw, ent[:]...)
	}
	for i := range raw {
		m.Bytes(table+uint64(i), 1)[0] = raw[i]
	}
	// The table overlaps the readable buffer (the guest may do that), so
	// the bytes the device must see are read after writing it.
	rd, dr := collect(m, boundary-100, 300), collect(m, boundary-10, 20)
	d.WriteDesc(0, table, uint32(len(raw)), drivertest.SplitFIndirect, 0)
	d.WriteAvail(0, 0)
	d.PublishIdx(1)
	var b virtq.Burst
	n, err := r.Pop(&b, 1)
	if err != nil || n != 1 {
		t.Fatalf("Pop: %d, %v", n, err)
	}
	segs := b.Readable(0)
	if len(segs) != 4 { // 300 straddling: 2, 20 straddling: 2
		t.Fatalf("%d readable segments, want 4", len(segs))
	}
	want := append(append([]byte{}, rd...), dr...)
	if got := bytes.Join(segs, nil); !bytes.Equal(got, want) {
		t.Fatalf("readable bytes differ")
	}
	if w := b.Writable(0); len(w) != 2 || len(w[0]) != 50 || len(w[1]) != 50 {
		t.Fatalf("writable segments %d, want 2 of 50", len(w))
	}
	if c := b.Chains[0]; c.ReadLen != 320 || c.WriteLen != 100 || c.Descs != 1 {
		t.Fatalf("chain %+v", c)
	}
}

// TestSaveRestore: a ring saved mid-stream (State) and rebuilt from it goes
// on where the first left off, even with chains still in flight: the new
// ring takes the used index from the used ring and never republishes or
// re-pops what the old one handled.
func TestSaveRestore(t *testing.T) {
	m := newMem(t, 8<<20, 8<<20)
	d := drivertest.NewSplitDriverAt(m, 0, 64, 65536-40, 4)
	h := newHarness(t, m, d, featAll, 4096, 3)
	for round := 0; round < 20; round++ {
		for i := 0; i < 10; i++ {
			h.add(h.randShape(true))
		}
		h.d.Publish()
		h.pop(7)
		h.complete(3, true)
		h.reap()
		// Save and restore. On even rounds the device finishes its
		// chains first (a clean stop); on odd rounds four are still in
		// flight, and without in-flight tracking by the front-end those
		// are lost: the new ring must neither re-pop them nor publish
		// used entries for them, and must carry on from the used index
		// in the used ring (the driver's Reap would trip over any used
		// entry nobody wrote).
		if round%2 == 0 {
			h.complete(len(h.popped), true)
			h.reap()
		}
		lost := append([]uint16(nil), h.popped...)
		state := h.r.State()
		cfg := h.d.Config(featAll)
		cfg.Base = state
		r2, err := split.New(cfg)
		if err != nil {
			t.Fatalf("round %d: restore at %d: %v", round, state, err)
		}
		if r2.State() != state || r2.InFlight() != 0 {
			t.Fatalf("restored State %d InFlight %d, want %d and 0", r2.State(), r2.InFlight(), state)
		}
		h.r = r2
		// Chains lost in flight: forget them on both sides so the harness
		// balances (the driver model would wait for them forever).
		for _, id := range lost {
			delete(h.want, id)
			h.added--
		}
		h.popped = h.popped[:0]
		h.forget(lost)
	}
	// Everything not lost completes through the last ring.
	for h.pop(virtq.MaxBurst) > 0 {
	}
	h.complete(len(h.popped), true)
	h.reap()
	if len(h.want) != 0 {
		t.Fatalf("%d chains never came back", len(h.want))
	}
}

// forget drops chains the device lost from the driver model by completing
// them behind the ring's back (as a reset would).
func (h *harness) forget(ids []uint16) {
	h.d.Forget(ids)
}

// collect reads guest bytes one at a time, across region boundaries.
func collect(m *drivertest.Mem, gpa uint64, n int) []byte {
	out := make([]byte, n)
	for i := range out {
		out[i] = m.Bytes(gpa+uint64(i), 1)[0]
	}
	return out
}

func putLE(b []byte, addr uint64, length uint32, flags, next uint16) {
	binary.LittleEndian.PutUint64(b, addr)
	binary.LittleEndian.PutUint32(b[8:], length)
	binary.LittleEndian.PutUint16(b[12:], flags)
	binary.LittleEndian.PutUint16(b[14:], next)
}
