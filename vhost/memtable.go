package vhost

import (
	"fmt"
	"math"

	"golang.org/x/sys/unix"

	"github.com/xvswitch/xvswitch/guestmem"
)

// DefaultMaxMemory is Config.MaxMemory's default: 1 TiB of address space
// for one device's guest memory. Mappings are MAP_NORESERVE, so the limit
// guards address space, not RAM: a sparse memfd makes a region of any size
// free to offer, and x86-64 user space has 128 TiB (47 bits) for every
// device and the Go heap together. 1 TiB is more than the guests a
// vhost-user switch serves (QEMU VMs up to hundreds of GiB) and still lets
// a hundred devices map their limit; a larger guest needs a larger
// MaxMemory.
const DefaultMaxMemory = 1 << 40

// maxHugePage bounds the page size hugetlbfs may report (1 GiB pages are
// the largest on x86-64 and arm64 with 4 KiB base pages).
const maxHugePage = 1 << 30

// mapping is one guest memory region mapped into this process.
type mapping struct {
	desc regionDesc
	file fileID
	raw  []byte // the whole mmap: whole (huge) pages of the file around the region
	host []byte // the region itself: file bytes [mmapOffset, mmapOffset+size)
	// With Config.Contiguous the mapping is a piece of a memRange, which
	// unmaps it as a whole, and keeps its fd open (so the region can be
	// mapped into the next range) until the mapping is released; fd is
	// -1 otherwise.
	fd     int
	ranged bool
}

// fileID is the file a region's fd referred to.
type fileID struct{ dev, ino uint64 }

func statID(st *unix.Stat_t) fileID { return fileID{st.Dev, st.Ino} }

// sameRegion reports whether mp maps region d of the file fd refers to:
// a front-end's copy of a region it already gave (see addMemReg).
func (mp *mapping) sameRegion(d regionDesc, fd int) bool {
	var st unix.Stat_t
	return mp.desc == d && unix.Fstat(fd, &st) == nil && statID(&st) == mp.file
}

// regionPlan is what mapping a region takes: the file's whole (huge)
// pages that hold it.
type regionPlan struct {
	file      fileID
	align     uint64 // the page size of the file (huge page on hugetlbfs)
	fileStart uint64 // file offset of the first page mapped
	length    uint64 // bytes mapped, a multiple of align
	head      uint64 // where the region starts in the mapping
}

// planRegion checks region d of fd and says which of its file's pages
// hold it: from the (huge) page that holds mmap_offset to the one that
// holds its end (docs/guest-memory.md).
func planRegion(fd int, d regionDesc) (regionPlan, error) {
	if d.size == 0 {
		return regionPlan{}, fmt.Errorf("%w: empty region (%v)", ErrBadMemTable, d)
	}
	end := d.mmapOffset + d.size
	if end < d.size || end > math.MaxInt64 {
		return regionPlan{}, fmt.Errorf("%w: region overflows (%v)", ErrBadMemTable, d)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return regionPlan{}, fmt.Errorf("%w: fstat region fd: %v", ErrBadMemTable, err)
	}
	// Touching a page past the end of the file raises SIGBUS, which would
	// take the whole process down: refuse a region the file cannot back.
	if st.Mode&unix.S_IFMT == unix.S_IFREG && uint64(st.Size) < end {
		return regionPlan{}, fmt.Errorf("%w: region ends at %#x but its file has %#x bytes (%v)", ErrBadMemTable, end, st.Size, d)
	}
	align, err := mapAlign(fd)
	if err != nil {
		return regionPlan{}, fmt.Errorf("%w: %v (%v)", ErrBadMemTable, err, d)
	}
	// end <= MaxInt64 and align <= 1 GiB: neither sum overflows.
	start := d.mmapOffset &^ (align - 1)
	length := (end+align-1)&^(align-1) - start
	return regionPlan{file: statID(&st), align: align, fileStart: start, length: length, head: d.mmapOffset - start}, nil
}

// mapRegion maps the region's fd MAP_SHARED: the file's whole pages that
// hold the region, nothing before or after them, one contiguous range
// starting on a page (a huge page on hugetlbfs). budget is the address
// space the device may still map (Config.MaxMemory less the rest of its
// table); a region that needs more is refused before anything is mapped.
// The fd is always closed: the mapping keeps the memory alive, and the fd
// has no further use. (With Config.Contiguous, mapRange maps the regions
// instead and keeps their fds.)
func mapRegion(fd int, d regionDesc, budget uint64) (*mapping, error) {
	defer unix.Close(fd)
	p, err := planRegion(fd, d)
	if err != nil {
		return nil, err
	}
	if p.length > budget {
		return nil, fmt.Errorf("%w: region needs %d bytes of address space, the device's MaxMemory leaves %d (%v)", ErrBadMemTable, p.length, budget, d)
	}
	raw, err := unix.Mmap(fd, int64(p.fileStart), int(p.length), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_NORESERVE)
	if err != nil {
		return nil, fmt.Errorf("%w: mmap %d bytes: %v (%v)", ErrBadMemTable, p.length, err, d)
	}
	return &mapping{desc: d, file: p.file, raw: raw, host: raw[p.head : p.head+d.size : p.head+d.size], fd: -1}, nil
}

// mapAlign is the granularity fd can be mapped at: the huge page size on
// hugetlbfs, where mmap refuses an offset that is not a multiple of it
// (EINVAL), and the page size anywhere else.
func mapAlign(fd int) (uint64, error) {
	pg := uint64(unix.Getpagesize())
	var sf unix.Statfs_t
	if err := unix.Fstatfs(fd, &sf); err != nil {
		return 0, fmt.Errorf("fstatfs region fd: %v", err)
	}
	if sf.Type != unix.HUGETLBFS_MAGIC {
		return pg, nil
	}
	bs := uint64(sf.Bsize)
	if bs < pg || bs > maxHugePage || bs&(bs-1) != 0 {
		return 0, fmt.Errorf("hugetlbfs reports a page size of %d", sf.Bsize)
	}
	return bs, nil
}

// mapped is the address space maps take.
func mapped(maps []*mapping) uint64 {
	var n uint64
	for _, m := range maps {
		n += uint64(len(m.raw))
	}
	return n
}

// unmap releases the mapping: its pages (unless its memRange owns them)
// and its fd.
func (m *mapping) unmap() {
	if m.raw != nil && !m.ranged {
		_ = unix.Munmap(m.raw)
	}
	m.raw, m.host = nil, nil
	if m.fd >= 0 {
		_ = unix.Close(m.fd)
		m.fd = -1
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
