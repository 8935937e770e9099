package vhost

import (
	"fmt"
	"math"

	"golang.org/x/sys/unix"

	"github.com/xvswitch/xvswitch/guestmem"
)

// mapping is one guest memory region mapped into this process.
type mapping struct {
	desc regionDesc
	raw  []byte // the whole mmap, from file offset 0
	host []byte // raw[mmapOffset : mmapOffset+size]
}

// mapRegion maps the region's fd MAP_SHARED. The fd is always closed: the
// mapping keeps the memory alive, and the fd has no further use.
func mapRegion(fd int, d regionDesc) (*mapping, error) {
	defer unix.Close(fd)
	if d.size == 0 {
		return nil, fmt.Errorf("%w: empty region (%v)", ErrBadMemTable, d)
	}
	end := d.mmapOffset + d.size
	if end < d.size || end > math.MaxInt64/2 {
		return nil, fmt.Errorf("%w: region overflows (%v)", ErrBadMemTable, d)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("%w: fstat region fd: %v", ErrBadMemTable, err)
	}
	// Touching a page past the end of the file raises SIGBUS, which would
	// take the whole process down: refuse a region the file cannot back.
	if st.Mode&unix.S_IFMT == unix.S_IFREG && uint64(st.Size) < end {
		return nil, fmt.Errorf("%w: region ends at %#x but its file has %#x bytes (%v)", ErrBadMemTable, end, st.Size, d)
	}
	length := end
	// hugetlbfs files must be mapped in whole huge pages; their block size
	// says how big those are.
	if bs := uint64(st.Blksize); bs > 0 && bs&(bs-1) == 0 {
		length = (length + bs - 1) &^ (bs - 1)
	}
	raw, err := unix.Mmap(fd, 0, int(length), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_NORESERVE)
	if err != nil {
		return nil, fmt.Errorf("%w: mmap %d bytes: %v (%v)", ErrBadMemTable, length, err, d)
	}
	return &mapping{desc: d, raw: raw, host: raw[d.mmapOffset:end:end]}, nil
}

func (m *mapping) unmap() {
	if m.raw != nil {
		_ = unix.Munmap(m.raw)
		m.raw, m.host = nil, nil
	}
}

func (m *mapping) region() guestmem.Region {
	return guestmem.Region{GuestAddr: m.desc.guestAddr, Size: m.desc.size, UserAddr: m.desc.userAddr, Host: m.host}
}

// buildMemory validates a table of mappings as a guestmem.Memory.
func buildMemory(maps []*mapping) (*guestmem.Memory, error) {
	rs := make([]guestmem.Region, len(maps))
	for i, m := range maps {
		rs[i] = m.region()
	}
	mem, err := guestmem.New(rs)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadMemTable, err)
	}
	return mem, nil
}

func unmapAll(maps []*mapping) {
	for _, m := range maps {
		m.unmap()
	}
}
