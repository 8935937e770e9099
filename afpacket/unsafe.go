package afpacket

// This file holds every use of package unsafe in afpacket. The invariants
// it relies on:
//
//   - The ring is memory mapped from the socket (or, in unit tests, an
//     anonymous mmap): page-aligned, mapped until the Socket is closed,
//     never moved by the Go runtime (it is not Go heap).
//   - Each slot starts at a multiple of the slot size, itself a multiple of
//     16 (TPACKET_ALIGNMENT), so its first word, tp_status, is 4-byte
//     aligned; statusWord checks the offset lies inside the mapping.
//   - tp_status is the only word the kernel and the process hand back and
//     forth: it is read with an atomic load (acquire: the kernel wrote the
//     slot before it set TP_STATUS_USER) and given back with an atomic
//     store (release: the process is done with the slot before the kernel
//     sees TP_STATUS_KERNEL). The rest of a slot is plain memory, read
//     or written only while tp_status says the process owns it.

import (
	"fmt"
	"sync/atomic"
	"unsafe"
)

// statusWord is the tp_status word of the slot at off in mem.
func statusWord(mem []byte, off int) (*atomic.Uint32, error) {
	if off < 0 || off%4 != 0 || off+4 > len(mem) {
		return nil, fmt.Errorf("afpacket: slot at %d outside a %d-byte ring", off, len(mem))
	}
	return (*atomic.Uint32)(unsafe.Pointer(&mem[off])), nil
}
