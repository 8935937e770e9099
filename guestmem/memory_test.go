package guestmem_test

import (
	"errors"
	"testing"

	"github.com/xvswitch/xvswitch/guestmem"
)

// region returns a region of size bytes whose host bytes are fresh (and so
// distinct from every other region's).
func region(gpa, size, uva uint64) guestmem.Region {
	return guestmem.Region{GuestAddr: gpa, Size: size, UserAddr: uva, Host: make([]byte, size)}
}

func TestNewRejects(t *testing.T) {
	tooMany := make([]guestmem.Region, guestmem.MaxRegions+1)
	for i := range tooMany {
		tooMany[i] = region(uint64(i)<<12, 16, uint64(i)<<12)
	}
	short := region(0x1000, 0x1000, 0x1000)
	short.Host = short.Host[:0xfff]
	cases := map[string][]guestmem.Region{
		"empty region":         {region(0x1000, 0, 0x1000)},
		"guest range wraps":    {{GuestAddr: ^uint64(0) - 0xff, Size: 0x200, UserAddr: 0, Host: make([]byte, 0x200)}},
		"user range wraps":     {{GuestAddr: 0, Size: 0x200, UserAddr: ^uint64(0) - 0xff, Host: make([]byte, 0x200)}},
		"ends at 2^64":         {{GuestAddr: ^uint64(0) - 0xff, Size: 0x100, UserAddr: 0, Host: make([]byte, 0x100)}},
		"short mapping":        {short},
		"nil mapping":          {{GuestAddr: 0x1000, Size: 0x1000, UserAddr: 0x1000}},
		"guest overlap":        {region(0x1000, 0x1000, 0x10000), region(0x1fff, 0x1000, 0x20000)},
		"guest contained":      {region(0x1000, 0x10000, 0x100000), region(0x8000, 0x10, 0x200000), region(0x20000, 0x10, 0x300000)},
		"guest identical":      {region(0x1000, 0x1000, 0x10000), region(0x1000, 0x1000, 0x20000)},
		"user overlap":         {region(0x1000, 0x1000, 0x10000), region(0x3000, 0x1000, 0x10fff)},
		"user contained":       {region(0x1000, 0x1000, 0x10000), region(0x3000, 0x10, 0x10800)},
		"user overlap, sorted": {region(0x3000, 0x1000, 0x10800), region(0x1000, 0x1000, 0x10000)},
		"too many regions":     tooMany,
	}
	for name, rs := range cases {
		if _, err := guestmem.New(rs); !errors.Is(err, guestmem.ErrBadTable) {
			t.Errorf("%s: New: %v, want ErrBadTable", name, err)
		}
	}
}

func TestNewAccepts(t *testing.T) {
	// Unsorted, touching in both spaces, mappings longer than the regions.
	a, b, c := region(0x3000, 0x1000, 0x5000), region(0x1000, 0x2000, 0x3000), region(0x10000, 0x10, 0x0)
	a.Host = make([]byte, 0x2000)
	in := []guestmem.Region{a, b, c}
	m, err := guestmem.New(in)
	if err != nil {
		t.Fatal(err)
	}
	in[0].GuestAddr = 0xdead000 // New must have copied the table
	rs := m.Regions()
	if len(rs) != 3 || rs[0].GuestAddr != 0x1000 || rs[1].GuestAddr != 0x3000 || rs[2].GuestAddr != 0x10000 {
		t.Fatalf("regions not sorted by guest address: %+v", rs)
	}
	if len(rs[1].Host) != 0x1000 || cap(rs[1].Host) != 0x1000 {
		t.Fatalf("mapping not trimmed to the region: len %d cap %d", len(rs[1].Host), cap(rs[1].Host))
	}
	// The byte after a's region is not reachable even though it is mapped.
	if _, err := m.Translate(0x4000, 1); !errors.Is(err, guestmem.ErrOutOfBounds) {
		t.Fatalf("Translate past a region's end (mapping longer): %v", err)
	}
	if _, err := guestmem.New(nil); err != nil {
		t.Fatalf("empty table: %v", err)
	}
	full := make([]guestmem.Region, guestmem.MaxRegions)
	for i := range full {
		full[i] = region(uint64(i)<<12, 16, uint64(i)<<12)
	}
	if _, err := guestmem.New(full); err != nil {
		t.Fatalf("%d regions: %v", guestmem.MaxRegions, err)
	}
}

// threeRegions: [0x1000, 0x2000) and [0x2000, 0x3000) adjacent in guest
// space (not in host or user space), and [0x10000, 0x10100) after a gap.
func threeRegions(t *testing.T) (*guestmem.Memory, []guestmem.Region) {
	t.Helper()
	rs := []guestmem.Region{
		region(0x1000, 0x1000, 0x7000_0000),
		region(0x2000, 0x1000, 0x5000_0000),
		region(0x10000, 0x100, 0x6000_0000),
	}
	m, err := guestmem.New(rs)
	if err != nil {
		t.Fatal(err)
	}
	return m, m.Regions()
}

// same reports whether b is exactly host[off:off+n] (same memory, not a
// copy) with no capacity beyond it.
func same(b, host []byte, off, n int) bool {
	if len(b) != n || cap(b) != n {
		return false
	}
	return n == 0 || &b[0] == &host[off]
}

func TestTranslate(t *testing.T) {
	m, rs := threeRegions(t)
	ok := []struct {
		gpa, n uint64
		r      int
		off    int
	}{
		{0x1000, 0x1000, 0, 0},    // a whole region
		{0x1fff, 1, 0, 0xfff},     // its last byte
		{0x2000, 1, 1, 0},         // first byte of the adjacent one
		{0x100ff, 1, 2, 0xff},     // last byte of the last one
		{0x1800, 0, 0, 0x800},     // empty
		{0x10000, 0x100, 2, 0x00}, // whole small region
	}
	for _, c := range ok {
		b, err := m.Translate(c.gpa, c.n)
		if err != nil || !same(b, rs[c.r].Host, c.off, int(c.n)) {
			t.Errorf("Translate(%#x, %d): %v, not region %d offset %#x", c.gpa, c.n, err, c.r, c.off)
		}
	}
	bad := []struct{ gpa, n uint64 }{
		{0x1fff, 2},               // straddles: Translate wants one region
		{0x3000, 1},               // one past the adjacent pair
		{0x2fff, 2},               // runs off the end
		{0x100ff, 2},              // runs into the gap
		{0x10100, 0},              // one past the end, empty
		{0x0, 1},                  // below everything
		{0x5000, 1},               // in the gap
		{0x1000, ^uint64(0)},      // huge length
		{0x1001, ^uint64(0)},      // huge length that overflows gpa+n
		{0x1fff, 1 << 63},         // overflow again
		{^uint64(0), 1},           // top of the address space
		{^uint64(0) - 0xfff, 0x1}, // far beyond
	}
	for _, c := range bad {
		if b, err := m.Translate(c.gpa, c.n); !errors.Is(err, guestmem.ErrOutOfBounds) {
			t.Errorf("Translate(%#x, %#x) = %d bytes, %v; want ErrOutOfBounds", c.gpa, c.n, len(b), err)
		}
	}
}

func TestAppendSegments(t *testing.T) {
	m, rs := threeRegions(t)
	var arr [4][]byte
	// Straddling the adjacent pair: two segments, each the right memory.
	segs, err := m.AppendSegments(arr[:0], 0x1ff0, 0x20)
	if err != nil || len(segs) != 2 || !same(segs[0], rs[0].Host, 0xff0, 0x10) || !same(segs[1], rs[1].Host, 0, 0x10) {
		t.Fatalf("straddling: %d segments, %v", len(segs), err)
	}
	if &segs[0] != &arr[0] {
		t.Fatal("AppendSegments did not fill the caller's array")
	}
	// Both whole regions.
	segs, err = m.AppendSegments(arr[:0], 0x1000, 0x2000)
	if err != nil || len(segs) != 2 || !same(segs[0], rs[0].Host, 0, 0x1000) || !same(segs[1], rs[1].Host, 0, 0x1000) {
		t.Fatalf("two whole regions: %d segments, %v", len(segs), err)
	}
	// Appends after what is there.
	segs, err = m.AppendSegments(arr[:1], 0x10010, 0x10)
	if err != nil || len(segs) != 2 || !same(segs[1], rs[2].Host, 0x10, 0x10) {
		t.Fatalf("append: %d segments, %v", len(segs), err)
	}
	// Runs off the pair into the gap, or starts in a gap.
	for _, c := range []struct{ gpa, n uint64 }{
		{0x1ff0, 0x1011}, {0x0, 1}, {0x3000, 1}, {0x100f0, 0x11},
		{0x1000, ^uint64(0)}, {0x2fff, 1 << 63}, {^uint64(0), 1},
	} {
		if _, err := m.AppendSegments(arr[:0], c.gpa, c.n); !errors.Is(err, guestmem.ErrOutOfBounds) {
			t.Errorf("AppendSegments(%#x, %#x): %v, want ErrOutOfBounds", c.gpa, c.n, err)
		}
	}
	// Never grows past the caller's capacity.
	segs, err = m.AppendSegments(arr[:0:1], 0x1ff0, 0x20)
	if !errors.Is(err, guestmem.ErrTooManySegments) || cap(segs) != 1 {
		t.Fatalf("capacity 1, straddling: %v (cap %d), want ErrTooManySegments", err, cap(segs))
	}
	if _, err := m.AppendSegments(arr[:2:2], 0x1000, 1); !errors.Is(err, guestmem.ErrTooManySegments) {
		t.Fatalf("full array: %v, want ErrTooManySegments", err)
	}
	// Zero length appends nothing.
	if segs, err := m.AppendSegments(arr[:0], 0x1000, 0); err != nil || len(segs) != 0 {
		t.Fatalf("zero length: %d segments, %v", len(segs), err)
	}
}

func TestTranslateUser(t *testing.T) {
	m, rs := threeRegions(t)
	// Host bytes from make are at least 8-aligned; pick offsets relative
	// to the real host alignment.
	base := 0
	for !guestmem.Aligned(rs[0].Host[base:], 16) {
		base++
	}
	uva := uint64(0x7000_0000 + base)
	if b, err := m.TranslateUser(uva, 64, 16); err != nil || !same(b, rs[0].Host, base, 64) {
		t.Fatalf("aligned: %v", err)
	}
	if _, err := m.TranslateUser(uva+2, 64, 4); !errors.Is(err, guestmem.ErrMisaligned) {
		t.Fatalf("2 off, align 4: %v, want ErrMisaligned", err)
	}
	if _, err := m.TranslateUser(uva+2, 64, 2); err != nil {
		t.Fatalf("2 off, align 2: %v", err)
	}
	if _, err := m.TranslateUser(uva+8, 64, 16); !errors.Is(err, guestmem.ErrMisaligned) {
		t.Fatalf("8 off, align 16: %v, want ErrMisaligned", err)
	}
	// Guest physical addresses are not front-end addresses.
	if _, err := m.TranslateUser(0x1000, 16, 1); !errors.Is(err, guestmem.ErrOutOfBounds) {
		t.Fatalf("guest address as user address: %v", err)
	}
	for _, c := range []struct{ uva, n uint64 }{
		{0x7000_0fff, 2},          // runs off the region (user space is not adjacent)
		{0x7000_1000, 1},          // one past
		{0x6000_0000, 0x101},      // one too long
		{0x7000_0000, ^uint64(0)}, // huge
		{^uint64(0), 1},
	} {
		if _, err := m.TranslateUser(c.uva, c.n, 1); !errors.Is(err, guestmem.ErrOutOfBounds) {
			t.Errorf("TranslateUser(%#x, %#x): %v, want ErrOutOfBounds", c.uva, c.n, err)
		}
	}
	if b, err := m.TranslateUser(0x6000_00ff, 1, 1); err != nil || !same(b, rs[2].Host, 0xff, 1) {
		t.Fatalf("last byte: %v", err)
	}
}

func TestGuestToUser(t *testing.T) {
	m, _ := threeRegions(t)
	for _, c := range []struct {
		gpa, uva uint64
		ok       bool
	}{{0x1000, 0x7000_0000, true}, {0x2fff, 0x5000_0fff, true}, {0x100ff, 0x6000_00ff, true}, {0x3000, 0, false}} {
		if uva, ok := m.GuestToUser(c.gpa); uva != c.uva || ok != c.ok {
			t.Errorf("GuestToUser(%#x) = %#x, %v; want %#x, %v", c.gpa, uva, ok, c.uva, c.ok)
		}
	}
}
