package packed_test

import (
	"errors"
	"testing"
	"unsafe"

	"github.com/xvswitch/xvswitch/packed"
	"github.com/xvswitch/xvswitch/virtq"
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
func (fz *fuzzer) checkFill(t *testing.T, cfg virtq.Config, st uint32, burst int) {
	t.Helper()
	m, j := fz.m, &fz.job
	snap := m.Snapshot()
	cfg.Base = st
	fr, err := packed.New(cfg)
	if err != nil {
		t.Fatalf("twin from state %#x: %v", st, err)
	}
	var frame [200]byte
	j.N = burst
	for i := 0; i < burst; i++ {
		j.Src[i] = frame[:1+(i*23)%len(frame)]
		j.Head[i] = virtq.FillHead{Lo: uint64(i), Hi: uint32(i)}
	}
	n, ferr := fr.Fill(j)
	if n < 0 || n > burst || (ferr != nil && n != 0) {
		t.Fatalf("Fill of %d frames: %d, %v", burst, n, ferr)
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
	lo, hi := uintptr(unsafe.Pointer(&ring[0])), uintptr(unsafe.Pointer(&ring[0]))+uintptr(len(ring))
	for i := 0; i < burst; i++ {
		k, err := ref.Pop(&fz.ref, 1)
		if err != nil {
			if ferr != nil && errors.Is(err, virtq.ErrBadID) {
				return
			}
			if i < n || ferr != nil {
				t.Fatalf("chain %d: Pop one by one: %v; Fill placed %d (%v)", i, err, n, ferr)
			}
			return
		}
		if k == 0 {
			if i < n || ferr != nil {
				t.Fatalf("chain %d: ring empty one by one; Fill placed %d (%v)", i, n, ferr)
			}
			return
		}
		if i >= n && ferr == nil {
			return
		}
		c, w := fz.ref.Chains[0], fz.ref.Writable(0)
		if i < n && (c.Descs != 1 || c.ReadLen != 0 || len(w) != 1 || c.WriteLen < uint32(virtq.FillHeadLen+len(j.Src[i])) || c.ID != ids[i]) {
			t.Fatalf("chain %d: Fill used id %d for a %d-byte frame; one by one: %+v", i, ids[i], len(j.Src[i]), c)
		}
		if len(w) == 1 {
			if p := uintptr(unsafe.Pointer(&w[0][0])); p < hi && p+virtq.FillHeadLen > lo {
				return // Fill's head of this buffer went onto the ring
			}
		}
	}
	if ferr != nil {
		t.Fatalf("Fill failed the ring (%v); one by one, %d chains pop", ferr, burst)
	}
}
