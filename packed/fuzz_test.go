package packed_test

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/xvswitch/xvswitch/packed"
	"github.com/xvswitch/xvswitch/virtq"
	"github.com/xvswitch/xvswitch/virtq/drivertest"
)

// The fuzz input, after an 8-byte header:
//
//	hdr[0], hdr[1]&3  ring size - 1 (1..1024)
//	hdr[2]            bit 0 INDIRECT_DESC, bit 1 EVENT_IDX, bit 2 IN_ORDER,
//	                  bit 3 raw flags (else a descriptor's AVAIL bit means
//	                  "make it available" and the ring bits are set to match
//	                  the slot's wrap counter), bits 4-7 burst size / 2
//	hdr[3:7]          ring state (indexes reduced modulo the size)
//	hdr[7]            16-byte units of scratch memory that follow
//
// then the scratch bytes (copied to guest memory at scratchOff of region 0,
// where indirect tables can live), then one or more rounds of size*16 bytes
// of descriptors. A descriptor address with bit 63 clear is moved near guest
// memory (addr%span + region 0 start - 256) so that the fuzzer reaches both
// regions, their boundary and just outside them.
const (
	fuzzRegion  = 64 << 10
	scratchOff  = 0x8000
	fuzzRounds  = 4
	fuzzRebase  = 256
	fuzzHdrSize = 8
)

var hostileSentinels = []error{
	virtq.ErrLoop, virtq.ErrChainTooLong, virtq.ErrNestedIndirect, virtq.ErrBadIndirect,
	virtq.ErrBadLength, virtq.ErrBadAddress, virtq.ErrBadID, virtq.ErrBadIndex, virtq.ErrWriteBeforeRead,
}

func FuzzPackedPop(f *testing.F) { fuzzPacked(f, fuzzPop) }

// FuzzPackedFill plays the same inputs as FuzzPackedPop with a Fill before
// each round's Pop (on a twin of the ring, the memory put back after it),
// checked against popping one by one (checkFill).
func FuzzPackedFill(f *testing.F) { fuzzPacked(f, fuzzFill) }

// FuzzPackedTake plays the same inputs as FuzzPackedPop with a Take before
// each round's Pop, on the ring itself, as the transmit queue does: what
// it takes and what Pop pops after it are checked against popping one by
// one (checkTaken, checkSameAsOneByOne).
func FuzzPackedTake(f *testing.F) { fuzzPacked(f, fuzzTake) }

// fuzzMode is what a fuzzer does in each round besides its Pop.
type fuzzMode int

const (
	fuzzPop  fuzzMode = iota // nothing else
	fuzzFill                 // a Fill on a twin first (checkFill)
	fuzzTake                 // a Take first (checkTaken)
)

// fuzzPacked runs a fuzzer over the seeds in mode.
func fuzzPacked(f *testing.F, mode fuzzMode) {
	m, err := drivertest.NewAdjacentMem(fuzzRegion)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(m.Close)
	for _, s := range fuzzSeeds(m) {
		f.Add(s)
	}
	fz := &fuzzer{m: m, used: make([]virtq.Used, 0, virtq.MaxBurst), mode: mode}
	f.Fuzz(func(t *testing.T, data []byte) {
		fz.run(t, data)
	})
}

// fuzzer holds what fuzz iterations reuse: guest memory and bursts (ref
// for the reference ring, see checkSameAsOneByOne).
type fuzzer struct {
	m    *drivertest.Mem
	b    virtq.Burst
	ref  virtq.Burst
	used []virtq.Used
	mode fuzzMode
	job  virtq.FillJob
	take virtq.TakeJob
}

// run plays one input: it returns how many chains were popped in all and
// the hostile error that stopped it, if any, after checking every outcome.
func (fz *fuzzer) run(t *testing.T, data []byte) (popped int, hostile error) {
	m, b := fz.m, &fz.b
	if len(data) < fuzzHdrSize {
		return 0, nil
	}
	hdr, data := data[:fuzzHdrSize], data[fuzzHdrSize:]
	size := 1 + (uint16(hdr[0]) | uint16(hdr[1]&3)<<8)
	var features uint64
	if hdr[2]&1 != 0 {
		features |= fIndirect
	}
	if hdr[2]&2 != 0 {
		features |= fEventIdx
	}
	if hdr[2]&4 != 0 {
		features |= fInOrder
	}
	raw := hdr[2]&8 != 0
	burst := 1 + int(hdr[2]>>4)*2
	st := binary.LittleEndian.Uint32(hdr[3:7])
	base := (st&0x7fff)%uint32(size) | st&(1<<15) | ((st>>16&0x7fff)%uint32(size))<<16 | st&(1<<31)
	for _, r := range m.Regions {
		clear(r.Host)
	}
	r0 := m.Regions[0].GuestAddr
	scratch := min(int(hdr[7])*16, len(data))
	copy(m.Bytes(r0+scratchOff, uint64(scratch)), data[:scratch])
	data = data[scratch:]
	ringBytes := int(size) * 16
	ring := m.Bytes(r0, uint64(ringBytes))
	cfg := virtq.Config{Mem: m.Memory, Size: size, Features: features, Base: base,
		Desc: m.User(r0), Driver: m.User(r0 + 0x7000), Device: m.User(r0 + 0x7004)}
	r, err := packed.New(cfg)
	if err != nil {
		t.Fatalf("New(size %d, base %#x): %v", size, base, err)
	}
	span := uint64(len(m.Regions)) * fuzzRegion
	for round := 0; round < fuzzRounds && len(data) > 0; round++ {
		chunk := data[:min(ringBytes, len(data))]
		data = data[len(chunk):]
		writeFuzzRing(ring, chunk, r.State(), size, raw, r0, span)
		if hdr[2]&0x80 != 0 {
			r.EnableKicks()
		} else {
			r.DisableKicks()
		}
		if fz.mode == fuzzFill {
			fz.checkFill(t, cfg, r.State(), burst, round%2 == 1) // eager every other round
		}
		// A twin of the ring in the same state, for the reference pops:
		// every chain is popped back to the driver at the end of a round.
		refCfg := cfg
		refCfg.Base = r.State()
		ref, rerr := packed.New(refCfg)
		if rerr != nil {
			t.Fatalf("twin from state %#x: %v", refCfg.Base, rerr)
		}
		k := 0
		if fz.mode == fuzzTake {
			k = r.Take(&fz.take, burst)
			fz.checkTaken(t, ref, k, burst)
		}
		n, err := 0, error(nil)
		if b.Reset(); k < burst {
			n, err = r.Pop(b, burst-k)
		}
		if fz.mode == fuzzTake && !fz.take.More && (n != 0 || err != nil) {
			t.Fatalf("Take of %d took %d and said Pop finds nothing; Pop: %d, %v", burst, k, n, err)
		}
		fz.checkSameAsOneByOne(t, ref, n, burst-k, err)
		if err != nil {
			checkHostile(t, r, b, err)
			return popped, err
		}
		if n != b.N || n > burst-k {
			t.Fatalf("Pop returned %d, burst holds %d, max %d", n, b.N, burst-k)
		}
		popped += k + n
		used := append(fz.used[:0], fz.take.Used[:k]...)
		for i := 0; i < n; i++ {
			c := b.Chains[i]
			var rl, wl int
			for _, s := range b.Readable(i) {
				if !inGuest(m, s) {
					t.Fatalf("chain %d: readable segment outside guest memory", i)
				}
				rl += len(s)
			}
			for _, s := range b.Writable(i) {
				if !inGuest(m, s) {
					t.Fatalf("chain %d: writable segment outside guest memory", i)
				}
				wl += len(s)
			}
			if uint32(rl) != c.ReadLen || uint32(wl) != c.WriteLen || c.ID >= size || c.Descs == 0 || c.Descs > size {
				t.Fatalf("chain %d: %+v with %d readable, %d writable bytes", i, c, rl, wl)
			}
			used = append(used, virtq.Used{ID: c.ID, Descs: c.Descs, Len: c.WriteLen / 2})
		}
		if features&fInOrder == 0 {
			for i, j := 0, len(used)-1; i < j; i, j = i+1, j-1 {
				used[i], used[j] = used[j], used[i]
			}
		}
		if err := r.Push(used); err != nil {
			t.Fatalf("Push of popped chains: %v", err)
		}
		r.NeedNotify()
		if r.InFlight() != 0 {
			t.Fatalf("%d in flight after pushing everything", r.InFlight())
		}
	}
	return popped, nil
}

// checkTaken pops k chains from ref, a twin of the ring in the state
// before a Take of up to burst that took k, one chain per Pop: each must
// be the chain Take took at its place, one readable descriptor of that id
// whose one segment is the buffer Take gave, inside guest memory.
func (fz *fuzzer) checkTaken(t *testing.T, ref *packed.Ring, k, burst int) {
	t.Helper()
	if k < 0 || k > burst {
		t.Fatalf("Take of up to %d took %d", burst, k)
	}
	rb, j := &fz.ref, &fz.take
	for i := 0; i < k; i++ {
		n, err := ref.Pop(rb, 1)
		if n != 1 || err != nil {
			t.Fatalf("taken %d: one by one: %d, %v", i, n, err)
		}
		c, buf := rb.Chains[0], j.Bufs[i]
		if j.Used[i] != (virtq.Used{ID: c.ID, Descs: 1}) || c.Descs != 1 || c.WriteLen != 0 || c.Malformed {
			t.Fatalf("taken %d: %+v; one by one %+v", i, j.Used[i], c)
		}
		if !inGuest(fz.m, buf) {
			t.Fatalf("taken %d: buffer outside guest memory", i)
		}
		sameSegs(t, i, [][]byte{buf}, rb.Readable(0))
	}
}

// checkSameAsOneByOne pops from ref, a twin of the ring the burst in fz.b
// came from (n chains, or err, from a Pop of up to burst), one chain per
// Pop: that never takes the batched path (a group needs a burst of four),
// so the batched path must have produced exactly what the general path
// does, chain for chain, segment for segment, and failed the same way.
func (fz *fuzzer) checkSameAsOneByOne(t *testing.T, ref *packed.Ring, n, burst int, err error) {
	t.Helper()
	b, rb := &fz.b, &fz.ref
	for i := 0; i < burst; i++ {
		k, rerr := ref.Pop(rb, 1)
		if rerr != nil {
			if err == nil && i < n {
				t.Fatalf("one by one, chain %d fails (%v); the burst popped %d", i, rerr, n)
			}
			if err != nil {
				for _, s := range hostileSentinels {
					if errors.Is(err, s) != errors.Is(rerr, s) {
						t.Fatalf("burst Pop: %v; one by one: %v", err, rerr)
					}
				}
			}
			return
		}
		if k == 0 {
			if err != nil || i < n {
				t.Fatalf("one by one, ring empty after %d chains; the burst popped %d (%v)", i, n, err)
			}
			return
		}
		if err != nil || i >= n {
			continue // the burst failed later on, or stopped for room
		}
		c, rc := b.Chains[i], rb.Chains[0]
		if c.ID != rc.ID || c.Descs != rc.Descs || c.ReadLen != rc.ReadLen || c.WriteLen != rc.WriteLen || c.Malformed != rc.Malformed {
			t.Fatalf("chain %d: burst %+v, one by one %+v", i, c, rc)
		}
		sameSegs(t, i, b.Readable(i), rb.Readable(0))
		sameSegs(t, i, b.Writable(i), rb.Writable(0))
	}
}

func sameSegs(t *testing.T, i int, a, b [][]byte) {
	t.Helper()
	if len(a) != len(b) {
		t.Fatalf("chain %d: %d segments, one by one %d", i, len(a), len(b))
	}
	for j := range a {
		if len(a[j]) != len(b[j]) || (len(a[j]) > 0 && &a[j][0] != &b[j][0]) {
			t.Fatalf("chain %d segment %d differs from one by one", i, j)
		}
	}
}

// TestFuzzSeeds checks that the seed corpus does what it claims: the valid
// seeds pop chains, the hostile ones fail with the right sentinel.
func TestFuzzSeeds(t *testing.T) {
	m, err := drivertest.NewAdjacentMem(fuzzRegion)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	fz := &fuzzer{m: m, used: make([]virtq.Used, 0, virtq.MaxBurst)}
	want := []struct {
		popped int
		err    error
	}{
		{1, nil}, {2, nil}, {1, nil}, {2, nil}, {1, nil},
		{0, virtq.ErrLoop}, {0, virtq.ErrNestedIndirect}, {0, virtq.ErrBadID},
		{1, nil}, {0, virtq.ErrBadAddress}, {0, virtq.ErrWriteBeforeRead},
		// A group of four for the batched path; then groups it must
		// refuse: an id twice, an id out of range, a buffer past the
		// end of memory, an id already in flight from the group before
		// (a ring of 8: two groups).
		{4, nil}, {0, virtq.ErrBadID}, {0, virtq.ErrBadID}, {0, virtq.ErrBadAddress}, {0, virtq.ErrBadID},
		// IN_ORDER; a zero length in a group (a malformed chain, popped).
		{4, nil}, {4, nil},
	}
	seeds := fuzzSeeds(m)
	if len(seeds) != len(want) {
		t.Fatalf("%d seeds, %d expectations", len(seeds), len(want))
	}
	for i, s := range seeds {
		popped, err := fz.run(t, s)
		if popped != want[i].popped || (want[i].err == nil) != (err == nil) || (err != nil && !errors.Is(err, want[i].err)) {
			t.Errorf("seed %d: popped %d, %v; want %d, %v", i, popped, err, want[i].popped, want[i].err)
		}
	}
}

// checkHostile checks that a failed Pop returned a sentinel and left the
// ring broken.
func checkHostile(t *testing.T, r *packed.Ring, b *virtq.Burst, err error) {
	t.Helper()
	ok := false
	for _, s := range hostileSentinels {
		ok = ok || errors.Is(err, s)
	}
	if !ok {
		t.Fatalf("Pop error %v is none of the sentinels", err)
	}
	if b.N != 0 {
		t.Fatalf("failed Pop left %d chains", b.N)
	}
	if _, err := r.Pop(b, virtq.MaxBurst); !errors.Is(err, virtq.ErrBroken) {
		t.Fatalf("Pop after %v: %v", err, err)
	}
	if r.NeedNotify() {
		t.Fatal("broken ring asks to notify")
	}
}

// writeFuzzRing copies fuzzer descriptors into the ring. Unless raw, a
// descriptor's AVAIL bit says whether to make it available, and its ring
// bits are set for the wrap counter its slot has next (given the device's
// state), so that the fuzzer reaches chains in every lap.
func writeFuzzRing(ring, chunk []byte, st uint32, size uint16, raw bool, r0, span uint64) {
	availIdx, wrap := uint16(st&0x7fff), st&(1<<15) != 0
	for i := 0; i+16 <= len(chunk); i += 16 {
		d := ring[i : i+16]
		copy(d, chunk[i:i+16])
		addr := binary.LittleEndian.Uint64(d)
		if addr>>63 == 0 {
			binary.LittleEndian.PutUint64(d, r0-fuzzRebase+addr%(span+2*fuzzRebase))
		}
		if raw {
			continue
		}
		slot := uint16(i / 16)
		w := wrap
		if slot < availIdx {
			w = !w // before the device's position: the next lap
		}
		flags := binary.LittleEndian.Uint16(d[14:])
		avail := flags&drivertest.PackedAvail != 0
		flags &^= drivertest.PackedAvail | drivertest.PackedUsed
		if avail == w {
			flags |= drivertest.PackedAvail
		} else {
			flags |= drivertest.PackedUsed
		}
		binary.LittleEndian.PutUint16(d[14:], flags)
	}
}

// fuzzSeeds builds inputs for fresh rings of 4 descriptors: valid chains
// of each kind and each hostile case.
func fuzzSeeds(m *drivertest.Mem) [][]byte {
	r0 := m.Regions[0].GuestAddr
	near := func(off uint64) uint64 { return fuzzRebase + off } // rebased to r0+off
	const av = drivertest.PackedAvail
	seed := func(hdr2 byte, scratch []drivertest.PackedDesc, descs ...drivertest.PackedDesc) []byte {
		out := []byte{3, 0, hdr2, 0, 0x80, 0, 0x80, byte(len(scratch))}
		var raw [16]byte
		for _, d := range scratch {
			putDesc(raw[:], d)
			out = append(out, raw[:]...)
		}
		for _, d := range descs {
			putDesc(raw[:], d)
			out = append(out, raw[:]...)
		}
		return out
	}
	single := func(id uint16) drivertest.PackedDesc {
		return drivertest.PackedDesc{Addr: near(0x9000 + uint64(id)*0x100), Len: 64, ID: id, Flags: av | dWrite}
	}
	group := func(ids ...uint16) []byte {
		var ds []drivertest.PackedDesc
		for _, id := range ids {
			ds = append(ds, single(id))
		}
		return seed(0xf0, nil, ds...)
	}
	ring8 := func(descs ...drivertest.PackedDesc) []byte {
		s := seed(0xf0, nil, descs...)
		s[0] = 7
		return s
	}
	table := []drivertest.PackedDesc{{Addr: r0 + 0x9000, Len: 64}, {Addr: r0 + 0xa000, Len: 64, Flags: drivertest.PackedWrite}}
	boundary := m.Regions[1].GuestAddr - r0
	return [][]byte{
		seed(0xf0, nil, drivertest.PackedDesc{Addr: near(0x9000), Len: 64, Flags: av}),
		seed(0xf0, nil,
			drivertest.PackedDesc{Addr: near(0x9000), Len: 64, Flags: av | dNext},
			drivertest.PackedDesc{Addr: near(0xa000), Len: 64, Flags: av | dNext | dWrite},
			drivertest.PackedDesc{Addr: near(0xb000), Len: 64, ID: 2, Flags: av | dWrite},
			drivertest.PackedDesc{Addr: near(boundary - 8), Len: 64, ID: 3, Flags: av}),
		seed(0xf1, table, drivertest.PackedDesc{Addr: near(scratchOff), Len: 32, ID: 1, Flags: av | dInd}),
		seed(0xf7, table,
			drivertest.PackedDesc{Addr: near(scratchOff), Len: 32, ID: 1, Flags: av | dInd},
			drivertest.PackedDesc{Addr: near(0x9000), Len: 64, ID: 0, Flags: av}),
		seed(0xf8, nil, drivertest.PackedDesc{Addr: near(0x9000), Len: 64, Flags: av}), // raw
		// Hostile: a loop, a nested table, a bad id, a zero length (a
		// malformed chain, popped, not an error), an address outside
		// memory, write before read.
		seed(0xf0, nil,
			drivertest.PackedDesc{Addr: near(0x9000), Len: 8, Flags: av | dNext},
			drivertest.PackedDesc{Addr: near(0x9000), Len: 8, Flags: av | dNext},
			drivertest.PackedDesc{Addr: near(0x9000), Len: 8, Flags: av | dNext},
			drivertest.PackedDesc{Addr: near(0x9000), Len: 8, Flags: av | dNext}),
		seed(0xf1, []drivertest.PackedDesc{{Addr: r0 + scratchOff, Len: 16, Flags: dInd}},
			drivertest.PackedDesc{Addr: near(scratchOff), Len: 16, Flags: av | dInd}),
		seed(0xf0, nil, drivertest.PackedDesc{Addr: near(0x9000), Len: 64, ID: 4, Flags: av}),
		seed(0xf0, nil, drivertest.PackedDesc{Addr: near(0x9000), Len: 0, Flags: av}),
		seed(0xf0, nil, drivertest.PackedDesc{Addr: 0, Len: 64, Flags: av}),
		seed(0xf0, nil,
			drivertest.PackedDesc{Addr: near(0x9000), Len: 8, Flags: av | dNext | dWrite},
			drivertest.PackedDesc{Addr: near(0x9000), Len: 8, ID: 1, Flags: av}),
		group(0, 1, 2, 3),
		group(0, 1, 1, 3),
		group(0, 1, 4, 3),
		seed(0xf0, nil, single(0), single(1), drivertest.PackedDesc{Addr: near(2*fuzzRegion - 32), Len: 64, ID: 2, Flags: av}, single(3)),
		ring8(single(0), single(1), single(2), single(3), single(4), single(5), single(1), single(7)),
		seed(0xf4, nil, single(0), single(1), single(2), single(3)),
		seed(0xf0, nil, single(0), single(1), drivertest.PackedDesc{Addr: near(0x9000), ID: 2, Flags: av}, single(3)),
	}
}
