package vhost

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// With Config.Contiguous a memory table is one range of this process's
// address space, as an AF_XDP UMEM must be (docs/zerocopy-kernel.md):
//
//	[switch-owned area | region 0 | region 1 | ...]
//
// reserved PROT_NONE and then mapped piece by piece with MAP_FIXED, every
// byte of it: the area and any alignment gap in front of a region are
// shared anonymous memory of the switch's, so a registration over the
// whole range finds no hole (which it refuses with ENOMEM). Each region
// is the same whole (huge) pages mapRegion maps, placed at a multiple of
// its page size (MAP_FIXED on hugetlbfs refuses anything else), and its
// fd stays open, so that the next table (ADD_MEM_REG, REM_MEM_REG) can map
// the region again into a range of its own. A table change builds a new
// range; the old one is unmapped whole once nothing uses it
// (docs/guest-memory.md has the order of events).

// regionSource is a region to map into a range and its fd, which mapRange
// takes over: kept by the region's mapping, or closed on failure.
type regionSource struct {
	desc regionDesc
	fd   int
}

// memRange is one contiguous memory table: the reserved range, and the
// owner's read-only view of it.
type memRange struct {
	mem    []byte
	layout *MemoryLayout
}

// unmap unmaps the whole range (nil: nothing).
func (r *memRange) unmap() {
	if r != nil {
		unmapRange(r.mem)
		r.mem = nil
	}
}

// mapRange maps srcs back to back behind an area of areaSize bytes (rounded
// up to a page) and returns the range and each region's mapping. The range
// must fit in budget bytes of address space. On failure nothing is left
// mapped and every fd of srcs is closed.
func mapRange(srcs []regionSource, areaSize, budget uint64) (*memRange, []*mapping, error) {
	if len(srcs) == 0 {
		// No memory is no range (replaceRange), never the area alone.
		return nil, nil, fmt.Errorf("%w: an empty contiguous table", ErrBadMemTable)
	}
	pg := uint64(unix.Getpagesize())
	closeAll := func() {
		for _, s := range srcs {
			closeFD(s.fd)
		}
	}
	plans := make([]regionPlan, len(srcs))
	at := make([]uint64, len(srcs)) // where each region's pages go in the range
	area := (areaSize + pg - 1) &^ (pg - 1)
	if area < areaSize {
		closeAll()
		return nil, nil, fmt.Errorf("%w: switch-owned area of %d bytes", ErrBadMemTable, areaSize)
	}
	cur, maxAlign := area, pg
	for i, s := range srcs {
		p, err := planRegion(s.fd, s.desc)
		if err != nil {
			closeAll()
			return nil, nil, err
		}
		plans[i] = p
		maxAlign = max(maxAlign, p.align)
		pos := (cur + p.align - 1) &^ (p.align - 1)
		if pos < cur || pos+p.length < pos || pos+p.length > budget {
			closeAll()
			return nil, nil, fmt.Errorf("%w: the contiguous table needs more than the %d bytes of address space the device's MaxMemory allows (region %v)", ErrBadMemTable, budget, s.desc)
		}
		at[i], cur = pos, pos+p.length
	}
	total := cur
	mem, err := reserveRange(total, maxAlign)
	if err != nil {
		closeAll()
		return nil, nil, fmt.Errorf("%w: reserve %d bytes of address space: %v", ErrBadMemTable, total, err)
	}
	fail := func(err error) (*memRange, []*mapping, error) {
		unmapRange(mem)
		closeAll()
		return nil, nil, err
	}
	// The switch's own memory: the area, then every gap in front of a
	// region (one appears only before a region whose page size the end of
	// what precedes it is not a multiple of).
	fill := func(from, to uint64) error {
		if to == from {
			return nil
		}
		if err := mapFixed(mem, from, to-from, -1, 0); err != nil {
			return fmt.Errorf("%w: map %d bytes of switch memory at range offset %#x: %v", ErrBadMemTable, to-from, from, err)
		}
		return nil
	}
	cur = 0
	l := &MemoryLayout{mem: mem, area: area}
	maps := make([]*mapping, len(srcs))
	for i, s := range srcs {
		p := plans[i]
		// Before region 0: the area and any gap up to its alignment.
		if err := fill(cur, at[i]); err != nil {
			return fail(err)
		}
		if err := mapFixed(mem, at[i], p.length, s.fd, p.fileStart); err != nil {
			return fail(fmt.Errorf("%w: mmap %d bytes at range offset %#x: %v (%v)", ErrBadMemTable, p.length, at[i], err, s.desc))
		}
		raw := mem[at[i] : at[i]+p.length : at[i]+p.length]
		maps[i] = &mapping{desc: s.desc, file: p.file, raw: raw,
			host: raw[p.head : p.head+s.desc.size : p.head+s.desc.size], fd: s.fd, ranged: true}
		l.regions = append(l.regions, LayoutRegion{GuestAddr: s.desc.guestAddr, Size: s.desc.size,
			UserAddr: s.desc.userAddr, Offset: at[i] + p.head})
		cur = at[i] + p.length
	}
	return &memRange{mem: mem, layout: l}, maps, nil
}
