package packed_test

import (
	"testing"

	"github.com/xvswitch/xvswitch/packed"
	"github.com/xvswitch/xvswitch/virtq"
	"github.com/xvswitch/xvswitch/virtq/drivertest"
)

// checkFill fills up to burst frames through a twin of the fuzzed ring
// (state st), reads back the used descriptors it wrote, puts guest memory
// back as it was, and pops the same ring one chain at a time: every frame
// Fill placed must have gone into a chain Pop takes, a single writable
// buffer of that id long enough for head and frame, used with head plus
// frame as its length; a Fill that fails the ring must have found an id
// that Pop refuses as given twice. Where a head Fill wrote lies on the
// ring (a hostile driver's buffer over its own descriptors), what Fill
// read after it differs from what Pop reads: the comparison stops there.
// An eager Fill (FillJob.Eager) must leave the same, and say it published
// all it placed.
func (fz *fuzzer) checkFill(t *testing.T, cfg virtq.Config, st uint32, burst int, eager bool) {
	t.Helper()
	m, j := fz.m, &fz.job
	snap := m.Snapshot()
	cfg.Base = st
	fr, err := packed.New(cfg)
	if err != nil {
		t.Fatalf("twin from state %#x: %v", st, err)
	}
	var frame [200]byte
	j.N, j.Eager = burst, eager
	for i := 0; i < burst; i++ {
		j.Src[i] = frame[:1+(i*23)%len(frame)]
		j.Head[i] = virtq.FillHead{Lo: uint64(i), Hi: uint32(i)}
	}
	n, ferr := fr.Fill(j)
	if n < 0 || n > burst || (ferr != nil && n != 0) {
		t.Fatalf("Fill of %d frames: %d, %v", burst, n, ferr)
	}
	if want := map[bool]int{true: n}[eager]; j.Published != want {
		t.Fatalf("Fill (eager %v) placed %d frames and says it published %d", eager, n, j.Published)
	}
	size := uint32(cfg.Size)
	ring := m.Bytes(m.Regions[0].GuestAddr, uint64(size)*16)
	ids := make([]uint16, n)
	at, wrap := st>>16&0x7fff, st>>31 != 0
	for i := 0; i < n; i++ {
		d := ring[at*16 : at*16+16]
		id, ln, flags := uint16(d[12])|uint16(d[13])<<8, uint32(d[8])|uint32(d[9])<<8|uint32(d[10])<<16|uint32(d[11])<<24, uint16(d[14])|uint16(d[15])<<8
		used := flags&(1<<7) != 0
		if used != wrap || (flags&(1<<15) != 0) != wrap || flags&2 == 0 || ln != uint32(virtq.FillHeadLen+len(j.Src[i])) {
			t.Fatalf("Fill's used descriptor %d at slot %d: id %d length %d flags %#x", i, at, id, ln, flags)
		}
		ids[i] = id
		if at++; at == size {
			at, wrap = 0, !wrap
		}
	}
	want := at
	if wrap {
		want |= 1 << 15
	}
	if got := fr.State(); got>>16 != want {
		t.Fatalf("state after Fill %#x, used position %d/%v", got, at, wrap)
	}
	for i, r := range m.Regions {
		copy(r.Host, snap[i])
	}
	ref, err := packed.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	drivertest.CheckFillAsPops(t, j, n, ids, ferr, func() (int, *virtq.Burst, error) {
		k, err := ref.Pop(&fz.ref, 1)
		return k, &fz.ref, err
	}, ring)
}
