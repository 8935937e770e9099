package drivertest

import (
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/xvswitch/xvswitch/guestmem"
)

// Mem is fake guest memory: regions of anonymous, page-aligned memory at
// guest physical addresses with gaps between them (so an address in a gap
// is outside guest memory), and a front-end virtual address space offset
// from the guest physical one (so mixing the two up is caught).
type Mem struct {
	*guestmem.Memory
	Regions []guestmem.Region
	next    []uint64 // bump allocator per region: next free guest address
	// maps are the mappings to unmap when a region's Host does not start
	// one (NewSharedMemAt); nil: each Host is its own mapping.
	maps [][]byte
}

// UserOffset is added to a guest address to get its front-end address.
const UserOffset = 0x7f00_0000_0000

// NewMem maps one region per size given; region i starts at guest address
// (i+1) * 1 GiB, so regions are never adjacent. Use Adjacent for a buffer
// that straddles two regions.
func NewMem(sizes ...uint64) (*Mem, error) {
	m := &Mem{}
	for i, sz := range sizes {
		b, err := unix.Mmap(-1, 0, int(sz), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
		if err != nil {
			return nil, err
		}
		gpa := uint64(i+1) << 30
		m.Regions = append(m.Regions, guestmem.Region{GuestAddr: gpa, Size: sz, UserAddr: gpa + UserOffset, Host: b})
		m.next = append(m.next, gpa)
	}
	var err error
	m.Memory, err = guestmem.New(m.Regions)
	return m, err
}

// NewAdjacentMem maps two regions back to back in guest physical space
// (but not in host memory), so a buffer can straddle them.
func NewAdjacentMem(size uint64) (*Mem, error) {
	m := &Mem{}
	for i := 0; i < 2; i++ {
		b, err := unix.Mmap(-1, 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
		if err != nil {
			return nil, err
		}
		gpa := uint64(1<<30) + uint64(i)*size
		m.Regions = append(m.Regions, guestmem.Region{GuestAddr: gpa, Size: size, UserAddr: gpa + UserOffset, Host: b})
		m.next = append(m.next, gpa)
	}
	var err error
	m.Memory, err = guestmem.New(m.Regions)
	return m, err
}

// Close unmaps the regions.
func (m *Mem) Close() {
	if m.maps != nil {
		for _, b := range m.maps {
			_ = unix.Munmap(b)
		}
		return
	}
	for _, r := range m.Regions {
		_ = unix.Munmap(r.Host)
	}
}

// Alloc returns the guest address of size fresh bytes in region i, aligned
// to align (a power of two). It panics when the region is full: a test bug.
func (m *Mem) Alloc(i int, size, align uint64) uint64 {
	a := (m.next[i] + align - 1) &^ (align - 1)
	r := m.Regions[i]
	if a+size > r.GuestAddr+r.Size {
		panic(fmt.Sprintf("drivertest: region %d full", i))
	}
	m.next[i] = a + size
	return a
}

// Bytes returns the host bytes of guest range [gpa, gpa+n); it panics on a
// bad range (a test bug).
func (m *Mem) Bytes(gpa, n uint64) []byte {
	b, err := m.Translate(gpa, n)
	if err != nil {
		panic(fmt.Sprintf("drivertest: bytes %#x+%d: %v", gpa, n, err))
	}
	return b
}

// User returns the front-end virtual address of a guest address.
func (m *Mem) User(gpa uint64) uint64 { return gpa + UserOffset }
