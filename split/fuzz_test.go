package split_test

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/xvswitch/xvswitch/split"
	"github.com/xvswitch/xvswitch/virtq"
	"github.com/xvswitch/xvswitch/virtq/drivertest"
)

// Fuzz input layout (fuzzRing decodes it):
//
//	0      size = 1 << (b[0] % 5)          (1..16)
//	1      bit 0 EVENT_IDX, bit 1 INDIRECT_DESC
//	2..3   avail idx the driver publishes
//	4..5   Base (the used idx in the used ring starts equal to it)
//	6..    descriptor table (16*size bytes), then avail entries (2*size),
//	       then up to fuzzTableLen bytes at fuzzTable (for indirect tables)
const (
	fuzzRing     = 1 << 30 // region 0: rings; guest address of the table
	fuzzUsed     = fuzzRing + 0x1000
	fuzzTable    = fuzzRing + 0x2000
	fuzzTableLen = 512
	fuzzData     = 2 << 30 // region 1: data buffers
)

type fuzzDesc struct {
	addr        uint64
	len         uint32
	flags, next uint16
}

// fuzzInput encodes a ring for the seed corpus.
func fuzzInput(shift, features byte, availIdx, base uint16, descs []fuzzDesc, heads []uint16, table []fuzzDesc) []byte {
	size := 1 << shift
	b := []byte{shift, features, 0, 0, 0, 0}
	binary.LittleEndian.PutUint16(b[2:], availIdx)
	binary.LittleEndian.PutUint16(b[4:], base)
	enc := func(ds []fuzzDesc, n int) {
		for i := 0; i < n; i++ {
			var e [16]byte
			if i < len(ds) {
				putLE(e[:], ds[i].addr, ds[i].len, ds[i].flags, ds[i].next)
			}
			b = append(b, e[:]...)
		}
	}
	enc(descs, size)
	for i := 0; i < size; i++ {
		h := uint16(0)
		if i < len(heads) {
			h = heads[i]
		}
		b = binary.LittleEndian.AppendUint16(b, h)
	}
	enc(table, len(table))
	return b
}

// FuzzSplitPop: whatever the driver writes into the descriptor table, the
// avail ring and indirect tables, Pop never panics, fails only with
// virtq's sentinels (and ErrBroken), pops nothing when it fails, and
// everything it pops is well-formed and can be pushed back. Before each
// Pop, a Fill on a twin of the ring must agree with popping one by one
// (checkFill), and so must a Take on another (checkTake).
func FuzzSplitPop(f *testing.F) {
	const r, w, n, ind = 0, drivertest.SplitFWrite, drivertest.SplitFNext, drivertest.SplitFIndirect
	d := uint64(fuzzData)
	f.Add(fuzzInput(3, 3, 1, 0, []fuzzDesc{{d, 64, r, 0}}, []uint16{0}, nil))
	f.Add(fuzzInput(3, 3, 2, 0, []fuzzDesc{{d, 14, n, 1}, {d + 64, 1500, w, 0}, {d, 100, w, 0}}, []uint16{0, 2}, nil))
	f.Add(fuzzInput(4, 3, 0x0001, 0xfffe, []fuzzDesc{{fuzzTable, 48, ind, 0}, {d, 10, n, 2}, {fuzzTable + 48, 16, ind, 0}},
		[]uint16{2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1},
		[]fuzzDesc{{d, 12, n, 1}, {d + 12, 100, n, 2}, {d + 200, 200, w, 0}, {d + 400, 8, w, 0}}))
	f.Add(fuzzInput(2, 2, 2, 0, []fuzzDesc{{d, 10, n, 0}, {d, 0, 0, 0}}, []uint16{0, 1}, nil))                                         // loop
	f.Add(fuzzInput(2, 2, 1, 0, []fuzzDesc{{fuzzTable, 32, ind, 0}}, []uint16{0}, []fuzzDesc{{d, 10, n, 1}, {fuzzTable, 16, ind, 0}})) // nested
	f.Add(fuzzInput(0, 0, 0x8001, 0x8000, []fuzzDesc{{d + 0xffff0, 0x20, w, 0}}, []uint16{0}, nil))                                    // off the region
	f.Add(fuzzInput(1, 1, 2, 0, []fuzzDesc{{d, 10, w | n, 1}, {d, 10, r, 0}}, []uint16{0, 0}, nil))                                    // write before read
	// Avail entries read four at a time: singles, a chain inside a group,
	// a head twice in a group, a group across the end of the avail ring.
	singles := []fuzzDesc{{d, 64, w, 0}, {d + 64, 64, w, 0}, {d + 128, 64, r, 0}, {d + 192, 64, w, 0}, {d + 256, 64, w, 0}, {d + 320, 64, w, 0}, {d + 384, 10, n, 7}, {d + 448, 64, w, 0}}
	f.Add(fuzzInput(3, 1, 8, 0, singles, []uint16{0, 1, 2, 3, 4, 5, 6, 7}, nil))
	f.Add(fuzzInput(3, 1, 7, 0, singles, []uint16{0, 1, 2, 3, 4, 6, 5}, nil))
	f.Add(fuzzInput(3, 1, 6, 0, singles, []uint16{0, 1, 2, 1, 4, 5}, nil))
	f.Add(fuzzInput(3, 1, 4, 0xfffe, singles, []uint16{2, 3, 4, 5, 0, 0, 0, 1}, nil))

	m, err := drivertest.NewMem(1<<20, 1<<20)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(m.Close)
	ringBytes := m.Bytes(fuzzRing, 0x2000+fuzzTableLen)
	burst, ref := new(virtq.Burst), new(virtq.Burst)
	job := new(virtq.FillJob)
	take, twin := new(virtq.TakeJob), new(virtq.Burst)
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) < 6 {
			return
		}
		size := 1 << (in[0] % 5)
		features := uint64(0)
		if in[1]&1 != 0 {
			features |= featEventIdx
		}
		if in[1]&2 != 0 {
			features |= featIndirect
		}
		availIdx := binary.LittleEndian.Uint16(in[2:])
		base := binary.LittleEndian.Uint16(in[4:])
		in = in[6:]
		clear(ringBytes)
		availAddr := uint64(fuzzRing + 16*size)
		desc := ringBytes[:16*size]
		avail := ringBytes[16*size : 16*size+6+2*size]
		in = in[copy(desc, in):]
		in = in[copy(avail[4:4+2*size], in):]
		copy(ringBytes[0x2000:], in)
		binary.LittleEndian.PutUint16(avail[2:], availIdx)
		binary.LittleEndian.PutUint16(ringBytes[0x1000+2:], base)

		cfg := virtq.Config{Mem: m.Memory, Size: uint16(size),
			Desc: m.User(fuzzRing), Driver: m.User(availAddr), Device: m.User(fuzzUsed),
			Features: features, Base: uint32(base)}
		ring, err := split.New(cfg)
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		used := make([]virtq.Used, 0, virtq.MaxBurst)
		for round := 0; round < 2; round++ {
			state := ring.State()
			checkFill(t, m, cfg, state, ringBytes, job, ref)
			checkTake(t, cfg, state, take, twin, ref)
			got, err := ring.Pop(burst, virtq.MaxBurst)
			sameOneByOne(t, cfg, state, burst, got, err, ref)
			if err != nil {
				if !errors.Is(err, virtq.ErrBroken) || !specific(err) {
					t.Fatalf("Pop: %v is not a broken-ring sentinel", err)
				}
				if got != 0 || burst.N != 0 || ring.State() != state {
					t.Fatalf("Pop failed but popped %d, State %d -> %d", got, state, ring.State())
				}
				if _, err2 := ring.Pop(burst, virtq.MaxBurst); !errors.Is(err2, virtq.ErrBroken) {
					t.Fatalf("Pop after %v: %v", err, err2)
				}
				return
			}
			seen := map[uint16]bool{}
			used = used[:0]
			for i := 0; i < got; i++ {
				c := &burst.Chains[i]
				if int(c.ID) >= size || seen[c.ID] || c.Descs == 0 || int(c.Descs) > size {
					t.Fatalf("chain %d: id %d descs %d (ring size %d, seen %v)", i, c.ID, c.Descs, size, seen[c.ID])
				}
				seen[c.ID] = true
				check := func(segs [][]byte, total uint32, what string) {
					sum := uint64(0)
					for _, s := range segs {
						if len(s) == 0 || cap(s) != len(s) {
							t.Fatalf("chain %d: %s segment len %d cap %d", i, what, len(s), cap(s))
						}
						sum += uint64(len(s))
					}
					if sum != uint64(total) {
						t.Fatalf("chain %d: %s segments hold %d bytes, chain says %d", i, what, sum, total)
					}
				}
				check(burst.Readable(i), c.ReadLen, "readable")
				check(burst.Writable(i), c.WriteLen, "writable")
				used = append(used, virtq.Used{ID: c.ID, Descs: c.Descs, Len: c.WriteLen})
			}
			before := binary.LittleEndian.Uint16(ringBytes[0x1000+2:])
			if err := ring.Push(used); err != nil {
				t.Fatalf("Push of what was popped: %v", err)
			}
			if after := binary.LittleEndian.Uint16(ringBytes[0x1000+2:]); after != before+uint16(got) || ring.InFlight() != 0 {
				t.Fatalf("used idx %d -> %d after pushing %d; InFlight %d", before, after, got, ring.InFlight())
			}
			ring.NeedNotify()
			ring.EnableKicks()
		}
	})
}

// sameOneByOne pops, from a twin of the ring made from its state before a
// Pop of up to MaxBurst that returned got chains in b or err, one chain per
// Pop: that never reads avail entries four at a time, and must give the
// same chains, segment for segment, or fail the same way.
func sameOneByOne(t *testing.T, cfg virtq.Config, state uint32, b *virtq.Burst, got int, err error, ref *virtq.Burst) {
	t.Helper()
	cfg.Base = state
	twin, nerr := split.New(cfg)
	if nerr != nil {
		t.Fatalf("twin from state %d: %v", state, nerr)
	}
	for i := 0; i < virtq.MaxBurst; i++ {
		k, rerr := twin.Pop(ref, 1)
		if rerr != nil {
			if err == nil && i < got {
				t.Fatalf("one by one, chain %d fails (%v); the burst popped %d", i, rerr, got)
			}
			if err != nil && specific(err) != specific(rerr) {
				t.Fatalf("burst Pop: %v; one by one: %v", err, rerr)
			}
			return
		}
		if k == 0 {
			if err != nil || i < got {
				t.Fatalf("one by one, ring empty after %d chains; the burst popped %d (%v)", i, got, err)
			}
			return
		}
		if err != nil || i >= got {
			continue
		}
		c, rc := b.Chains[i], ref.Chains[0]
		if c.ID != rc.ID || c.Descs != rc.Descs || c.ReadLen != rc.ReadLen || c.WriteLen != rc.WriteLen || c.Malformed != rc.Malformed {
			t.Fatalf("chain %d: burst %+v, one by one %+v", i, c, rc)
		}
		for _, p := range [][2][][]byte{{b.Readable(i), ref.Readable(0)}, {b.Writable(i), ref.Writable(0)}} {
			if len(p[0]) != len(p[1]) {
				t.Fatalf("chain %d: %d segments, one by one %d", i, len(p[0]), len(p[1]))
			}
			for j := range p[0] {
				if len(p[0][j]) != len(p[1][j]) || &p[0][j][0] != &p[1][j][0] {
					t.Fatalf("chain %d segment %d differs from one by one", i, j)
				}
			}
		}
	}
}

// specific reports whether err wraps a sentinel other than ErrBroken.
func specific(err error) bool {
	for _, s := range []error{virtq.ErrLoop, virtq.ErrChainTooLong, virtq.ErrNestedIndirect,
		virtq.ErrBadIndirect, virtq.ErrBadLength, virtq.ErrBadAddress, virtq.ErrBadID, virtq.ErrBadIndex,
		virtq.ErrWriteBeforeRead} {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}
