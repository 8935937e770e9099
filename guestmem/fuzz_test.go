package guestmem_test

import (
	"errors"
	"testing"

	"github.com/xvswitch/xvswitch/guestmem"
)

// FuzzTranslate checks Translate, AppendSegments and TranslateUser against a
// plain reference model of threeRegions for any address and length: every
// result is exactly the expected host memory, every failure the expected
// sentinel, and nothing panics.
func FuzzTranslate(f *testing.F) {
	for _, s := range []struct {
		gpa, n, uva uint64
		align       uint8
	}{
		{0x1000, 0x1000, 0x7000_0000, 4}, {0x1fff, 2, 0x7000_0fff, 1}, {0x1ff0, 0x20, 0x5000_0ff0, 2},
		{0x2fff, 1, 0x6000_00ff, 0}, {0x10000, 0x100, 0x6000_0000, 3}, {0x3000, 1, 0x5000_1000, 1},
		{0x1000, ^uint64(0), ^uint64(0), 6}, {^uint64(0), 1, 0, 0}, {0x1001, 1 << 63, 0x7000_0001, 2},
		{0x1800, 0, 0x7000_0800, 5},
	} {
		f.Add(s.gpa, s.n, s.uva, s.align)
	}
	rs0 := []guestmem.Region{
		region(0x1000, 0x1000, 0x7000_0000),
		region(0x2000, 0x1000, 0x5000_0000),
		region(0x10000, 0x100, 0x6000_0000),
	}
	m, err := guestmem.New(rs0)
	if err != nil {
		f.Fatal(err)
	}
	rs := m.Regions()
	// where is the reference lookup: the region holding address a in the
	// guest (user=false) or front-end (user=true) space.
	where := func(a uint64, user bool) (int, uint64, bool) {
		for i, r := range rs {
			start := r.GuestAddr
			if user {
				start = r.UserAddr
			}
			if a >= start && a-start < r.Size {
				return i, a - start, true
			}
		}
		return 0, 0, false
	}
	f.Fuzz(func(t *testing.T, gpa, n, uva uint64, align uint8) {
		// Translate: one region or nothing.
		b, err := m.Translate(gpa, n)
		ri, off, ok := where(gpa, false)
		if ok && n <= rs[ri].Size-off {
			if err != nil || !same(b, rs[ri].Host, int(off), int(n)) {
				t.Fatalf("Translate(%#x, %#x): %v, want region %d offset %#x", gpa, n, err, ri, off)
			}
		} else if !errors.Is(err, guestmem.ErrOutOfBounds) || b != nil {
			t.Fatalf("Translate(%#x, %#x): %d bytes, %v; want ErrOutOfBounds", gpa, n, len(b), err)
		}

		// AppendSegments: walk the reference model region by region.
		var arr [4][]byte
		segs, err := m.AppendSegments(arr[:0], gpa, n)
		var wantErr error
		cur, left, k := gpa, n, 0
		for left > 0 {
			ri, off, ok := where(cur, false)
			if !ok {
				wantErr = guestmem.ErrOutOfBounds
				break
			}
			if k == len(arr) {
				wantErr = guestmem.ErrTooManySegments
				break
			}
			take := min(left, rs[ri].Size-off)
			if k >= len(segs) || !same(segs[k], rs[ri].Host, int(off), int(take)) {
				t.Fatalf("AppendSegments(%#x, %#x): segment %d is not region %d offset %#x+%#x (%v)", gpa, n, k, ri, off, take, err)
			}
			cur, left, k = cur+take, left-take, k+1
		}
		if wantErr == nil && (err != nil || len(segs) != k) {
			t.Fatalf("AppendSegments(%#x, %#x): %d segments, %v; want %d", gpa, n, len(segs), err, k)
		}
		if wantErr != nil && !errors.Is(err, wantErr) {
			t.Fatalf("AppendSegments(%#x, %#x): %v, want %v", gpa, n, err, wantErr)
		}
		if cap(segs) != len(arr) {
			t.Fatalf("AppendSegments grew the caller's array")
		}

		// TranslateUser: one region, aligned host address.
		al := uint64(1) << (align % 7)
		b, err = m.TranslateUser(uva, n, al)
		ri, off, ok = where(uva, true)
		switch {
		case !ok || n > rs[ri].Size-off:
			if !errors.Is(err, guestmem.ErrOutOfBounds) {
				t.Fatalf("TranslateUser(%#x, %#x, %d): %v, want ErrOutOfBounds", uva, n, al, err)
			}
		case n > 0 && !guestmem.Aligned(rs[ri].Host[off:], al):
			if !errors.Is(err, guestmem.ErrMisaligned) {
				t.Fatalf("TranslateUser(%#x, %#x, %d): %v, want ErrMisaligned", uva, n, al, err)
			}
		default:
			if err != nil || !same(b, rs[ri].Host, int(off), int(n)) {
				t.Fatalf("TranslateUser(%#x, %#x, %d): %v, want region %d offset %#x", uva, n, al, err, ri, off)
			}
		}
	})
}
