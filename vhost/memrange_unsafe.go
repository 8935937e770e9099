package vhost

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// The address arithmetic of a contiguous memory table (memrange.go):
// mmap at fixed addresses inside a range this process reserved, which
// unix.Mmap cannot do. Invariants:
//   - reserveRange returns a range that is ours alone: reserved PROT_NONE
//     (so nothing else of the process is ever placed inside it), start
//     aligned as asked, length a multiple of the page size;
//   - mapFixed only maps inside such a range (it checks the bounds) and
//     only replaces part of it, never memory outside it;
//   - unmapRange is called once per range, when nothing reads it any more
//     (no poller holds a ring over it, the owner's hook has returned); it
//     unmaps exactly the reserved range, whatever is mapped in it.

// reserveRange reserves length bytes of address space starting on a
// multiple of align (a power of two, at least the page size), PROT_NONE
// and MAP_NORESERVE: address space only, no memory.
func reserveRange(length, align uint64) ([]byte, error) {
	pg := uint64(unix.Getpagesize())
	extra := align - pg
	p, err := unix.MmapPtr(-1, 0, nil, uintptr(length+extra), unix.PROT_NONE,
		unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_NORESERVE)
	if err != nil {
		return nil, err
	}
	addr := uint64(uintptr(p))
	base := (addr + align - 1) &^ (align - 1)
	// Give back the slack in front of the aligned start and behind its end.
	if head := base - addr; head > 0 {
		_ = unix.MunmapPtr(p, uintptr(head))
	}
	if tail := addr + length + extra - (base + length); tail > 0 {
		_ = unix.MunmapPtr(unsafe.Add(p, base-addr+length), uintptr(tail))
	}
	return unsafe.Slice((*byte)(unsafe.Add(p, base-addr)), length), nil
}

// mapFixed maps length bytes of fd from offset (fd -1: shared anonymous
// memory) read-write at rng[at:], replacing the reservation there.
func mapFixed(rng []byte, at, length uint64, fd int, offset uint64) error {
	if at > uint64(len(rng)) || length > uint64(len(rng))-at || length == 0 {
		return unix.EINVAL
	}
	flags := unix.MAP_SHARED | unix.MAP_FIXED | unix.MAP_NORESERVE
	if fd < 0 {
		flags |= unix.MAP_ANONYMOUS
		offset = 0
	}
	_, err := unix.MmapPtr(fd, int64(offset), unsafe.Pointer(&rng[at]), uintptr(length), unix.PROT_READ|unix.PROT_WRITE, flags)
	return err
}

// unmapRange unmaps a range from reserveRange and everything in it.
func unmapRange(rng []byte) {
	if len(rng) > 0 {
		_ = unix.MunmapPtr(unsafe.Pointer(unsafe.SliceData(rng)), uintptr(len(rng)))
	}
}

// Base is the address of the range's first byte (MemoryLayout.Range).
func (l *MemoryLayout) Base() uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(l.mem))) }
