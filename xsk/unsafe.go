package xsk

// This file holds every use of package unsafe in xsk. The invariants it
// relies on:
//
//   - Ring memory comes from mmap of the socket (or, in unit tests, an
//     anonymous mmap): it is page-aligned, stays mapped until the ring is
//     closed, and is never moved by the Go runtime (it is not Go heap).
//     The kernel's offsets (XDP_MMAP_OFFSETS) are checked to lie inside the
//     mapping and to be aligned for the words placed on them before any
//     pointer is formed.
//   - The producer, consumer and flags words are shared with the kernel and
//     are only ever accessed through sync/atomic (acquire loads, release
//     stores); descriptor slots are plain memory whose visibility is ordered
//     by those atomics.
//   - Pointers to kernel structs passed to get/setsockopt point at Go values
//     that stay alive across the syscall (runtime.KeepAlive is not needed:
//     the values are used after the call or escape to the caller).

import (
	"fmt"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ringWords returns the shared producer, consumer and flags words of a ring
// mapped at mem, after checking the kernel's offsets against the mapping.
func ringWords(mem []byte, off unix.XDPRingOffset) (prod, cons, flags *atomic.Uint32, err error) {
	for _, o := range []uint64{off.Producer, off.Consumer, off.Flags} {
		if o%4 != 0 || o+4 > uint64(len(mem)) {
			return nil, nil, nil, fmt.Errorf("%w: ring word offset %d outside a %d-byte mapping", ErrRingLayout, o, len(mem))
		}
	}
	prod = (*atomic.Uint32)(unsafe.Pointer(&mem[off.Producer]))
	cons = (*atomic.Uint32)(unsafe.Pointer(&mem[off.Consumer]))
	flags = (*atomic.Uint32)(unsafe.Pointer(&mem[off.Flags]))
	return prod, cons, flags, nil
}

// addrSlots views n uint64 slots (fill and completion rings) at off.Desc.
func addrSlots(mem []byte, off unix.XDPRingOffset, n uint32) ([]uint64, error) {
	if off.Desc%8 != 0 || off.Desc+uint64(n)*8 > uint64(len(mem)) {
		return nil, fmt.Errorf("%w: %d address slots at %d outside a %d-byte mapping", ErrRingLayout, n, off.Desc, len(mem))
	}
	return unsafe.Slice((*uint64)(unsafe.Pointer(&mem[off.Desc])), n), nil
}

// descSlots views n descriptor slots (RX and TX rings) at off.Desc.
func descSlots(mem []byte, off unix.XDPRingOffset, n uint32) ([]unix.XDPDesc, error) {
	const sz = uint64(unsafe.Sizeof(unix.XDPDesc{}))
	if off.Desc%8 != 0 || off.Desc+uint64(n)*sz > uint64(len(mem)) {
		return nil, fmt.Errorf("%w: %d descriptors at %d outside a %d-byte mapping", ErrRingLayout, n, off.Desc, len(mem))
	}
	return unsafe.Slice((*unix.XDPDesc)(unsafe.Pointer(&mem[off.Desc])), n), nil
}

// descSize is the size of one RX/TX descriptor in ring memory.
const descSize = uint64(unsafe.Sizeof(unix.XDPDesc{}))

// baseAddr returns the virtual address of mem's first byte (for page
// alignment checks and XDP_UMEM_REG).
func baseAddr(mem []byte) uintptr {
	if len(mem) == 0 {
		return 0
	}
	return uintptr(unsafe.Pointer(&mem[0]))
}

// setsockoptUMEMReg registers mem as the UMEM of socket fd.
func setsockoptUMEMReg(fd int, mem []byte, frameSize, headroom, flags uint32) error {
	reg := unix.XDPUmemReg{
		Addr:     uint64(baseAddr(mem)),
		Len:      uint64(len(mem)),
		Size:     frameSize,
		Headroom: headroom,
		Flags:    flags,
	}
	_, _, e := unix.Syscall6(unix.SYS_SETSOCKOPT, uintptr(fd), unix.SOL_XDP, unix.XDP_UMEM_REG,
		uintptr(unsafe.Pointer(&reg)), unsafe.Sizeof(reg), 0)
	if e != 0 {
		return e
	}
	return nil
}

// getsockoptMmapOffsets reads where the kernel placed each ring's words.
func getsockoptMmapOffsets(fd int) (unix.XDPMmapOffsets, error) {
	var off unix.XDPMmapOffsets
	size := uint32(unsafe.Sizeof(off))
	_, _, e := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), unix.SOL_XDP, unix.XDP_MMAP_OFFSETS,
		uintptr(unsafe.Pointer(&off)), uintptr(unsafe.Pointer(&size)), 0)
	if e != 0 {
		return off, e
	}
	if uintptr(size) != unsafe.Sizeof(off) {
		// A pre-5.4 kernel without the flags word: need_wakeup would be
		// unreadable, and we rely on it.
		return off, fmt.Errorf("%w: XDP_MMAP_OFFSETS returned %d bytes, want %d", ErrRingLayout, size, unsafe.Sizeof(off))
	}
	return off, nil
}

// getsockoptStatistics reads the kernel's XDP_STATISTICS of socket fd.
func getsockoptStatistics(fd int) (unix.XDPStatistics, error) {
	var st unix.XDPStatistics
	size := uint32(unsafe.Sizeof(st))
	_, _, e := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), unix.SOL_XDP, unix.XDP_STATISTICS,
		uintptr(unsafe.Pointer(&st)), uintptr(unsafe.Pointer(&size)), 0)
	if e != 0 {
		return st, e
	}
	return st, nil
}
