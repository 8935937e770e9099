package virtionet

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// preadv2NoWait reads into b with preadv2(fd, one iovec, offset -1,
// RWF_NOWAIT). unix.Preadv2 builds its iovec slice on the heap; this one
// stays on the stack, so a read costs no allocation.
//
// Invariants for the unsafe.Pointer conversions: iov and the bytes it
// points at (b) are live for the whole call (both are referenced after
// it), the kernel writes at most len(b) bytes there, and the pointers are
// converted to uintptr inside the Syscall6 call expression, which keeps
// them alive and unmoved until it returns.
func preadv2NoWait(fd int, b []byte) (int, error) {
	iov := unix.Iovec{Base: &b[0]}
	iov.SetLen(len(b))
	// Offset -1 (both halves of pos_l/pos_h): read at the file position,
	// as read(2) does; an eventfd has no other.
	n, _, errno := unix.Syscall6(unix.SYS_PREADV2, uintptr(fd), uintptr(unsafe.Pointer(&iov)), 1,
		^uintptr(0), ^uintptr(0), unix.RWF_NOWAIT)
	_ = iov.Base
	if errno != 0 {
		return 0, errno
	}
	return int(n), nil
}
