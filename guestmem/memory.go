package guestmem

import (
	"fmt"
	"sort"
)

// MaxRegions bounds a memory table. vhost-user's SET_MEM_TABLE carries at
// most 8; with CONFIGURE_MEM_SLOTS a front-end may add more, one at a time.
const MaxRegions = 509

// Region is one entry of a vhost-user memory table together with the
// host mapping of its bytes.
type Region struct {
	GuestAddr uint64 // guest physical address of the first byte
	Size      uint64
	UserAddr  uint64 // the front-end's virtual address of the first byte
	Host      []byte // this process's mapping; len(Host) >= Size
}

func (r *Region) guestEnd() uint64 { return r.GuestAddr + r.Size }
func (r *Region) userEnd() uint64  { return r.UserAddr + r.Size }

// Memory is an immutable memory table. Rings hold a *Memory; replacing the
// table means building a new Memory and new rings over it.
type Memory struct {
	regions []Region  // sorted by GuestAddr, non-overlapping
	log     *DirtyLog // while the guest migrates: where writes are marked (logged.go)
}

// New validates a memory table and returns it. Regions must not overlap in
// guest physical or front-end virtual space, must not wrap the address
// space, and each mapping must cover its region.
func New(regions []Region) (*Memory, error) {
	if len(regions) > MaxRegions {
		return nil, fmt.Errorf("%w: %d regions (max %d)", ErrBadTable, len(regions), MaxRegions)
	}
	rs := append([]Region(nil), regions...)
	for i := range rs {
		r := &rs[i]
		if r.Size == 0 {
			return nil, fmt.Errorf("%w: region %d is empty", ErrBadTable, i)
		}
		if r.guestEnd() < r.GuestAddr || r.userEnd() < r.UserAddr {
			return nil, fmt.Errorf("%w: region %d wraps the address space", ErrBadTable, i)
		}
		if uint64(len(r.Host)) < r.Size {
			return nil, fmt.Errorf("%w: region %d maps %d bytes of %d", ErrBadTable, i, len(r.Host), r.Size)
		}
		r.Host = r.Host[:r.Size:r.Size]
	}
	sort.Slice(rs, func(i, j int) bool { return rs[i].GuestAddr < rs[j].GuestAddr })
	for i := 1; i < len(rs); i++ {
		if rs[i].GuestAddr < rs[i-1].guestEnd() {
			return nil, fmt.Errorf("%w: regions overlap at guest address %#x", ErrBadTable, rs[i].GuestAddr)
		}
	}
	for i := range rs {
		for j := i + 1; j < len(rs); j++ {
			if rs[i].UserAddr < rs[j].userEnd() && rs[j].UserAddr < rs[i].userEnd() {
				return nil, fmt.Errorf("%w: regions overlap at front-end address %#x", ErrBadTable, rs[j].UserAddr)
			}
		}
	}
	return &Memory{regions: rs}, nil
}

// Regions returns the table, sorted by guest address. Callers must not
// modify it.
func (m *Memory) Regions() []Region { return m.regions }

// find returns the region holding guest address gpa.
func (m *Memory) find(gpa uint64) *Region {
	// Tables are short (1-8 regions in practice): a linear scan beats a
	// binary search and keeps the hot path branch-predictable.
	for i := range m.regions {
		r := &m.regions[i]
		if gpa-r.GuestAddr < r.Size {
			return r
		}
	}
	return nil
}

// Translate returns the host bytes of [gpa, gpa+length) when they lie in one
// region. A zero length yields an empty, non-nil-checked slice.
func (m *Memory) Translate(gpa, length uint64) ([]byte, error) {
	r := m.find(gpa)
	if r == nil {
		return nil, ErrOutOfBounds
	}
	off := gpa - r.GuestAddr
	if length > r.Size-off {
		return nil, ErrOutOfBounds
	}
	return r.Host[off : off+length : off+length], nil
}

// AppendSegments appends to dst the host bytes of [gpa, gpa+length), split
// where the buffer crosses from one region into the next, and returns the
// extended slice. It never grows dst past its capacity: if the buffer needs
// more segments than fit, it returns ErrTooManySegments, so that callers can
// pass fixed arrays and stay allocation-free.
func (m *Memory) AppendSegments(dst [][]byte, gpa, length uint64) ([][]byte, error) {
	for length > 0 {
		r := m.find(gpa)
		if r == nil {
			return dst, ErrOutOfBounds
		}
		off := gpa - r.GuestAddr
		n := r.Size - off
		if n > length {
			n = length
		}
		if len(dst) == cap(dst) {
			return dst, ErrTooManySegments
		}
		dst = append(dst, r.Host[off:off+n:off+n])
		gpa += n
		length -= n
	}
	return dst, nil
}

// TranslateUser returns the host bytes of a ring area the front-end gave as
// its own virtual address (vhost-user SET_VRING_ADDR). The area must lie in
// one region and its host address must be aligned to align (a power of two),
// because ring fields are accessed atomically.
func (m *Memory) TranslateUser(uva, length, align uint64) ([]byte, error) {
	for i := range m.regions {
		r := &m.regions[i]
		off := uva - r.UserAddr
		if off >= r.Size {
			continue
		}
		if length > r.Size-off {
			return nil, ErrOutOfBounds
		}
		b := r.Host[off : off+length : off+length]
		if length > 0 && !Aligned(b, align) {
			return nil, ErrMisaligned
		}
		return b, nil
	}
	return nil, ErrOutOfBounds
}

// GuestToUser converts a guest physical address to the front-end's virtual
// address, for tests and for logs.
func (m *Memory) GuestToUser(gpa uint64) (uint64, bool) {
	r := m.find(gpa)
	if r == nil {
		return 0, false
	}
	return r.UserAddr + (gpa - r.GuestAddr), true
}
