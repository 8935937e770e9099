package guestmem

// This file, dirtylog_unsafe.go and copystream_unsafe.go (with its
// assembly, copystream_amd64.s) are the only ones of the package that use
// unsafe. This one's invariants:
//   - every accessor indexes the slice at the last byte it touches before
//     taking a pointer, so an out-of-range offset panics as a bounds check
//     would, instead of touching memory outside b (callers check offsets
//     against ring sizes they validated at setup, so this never fires on
//     guest input);
//   - 32-bit accessors need 4-byte aligned host addresses, 16-bit ones 2-byte
//     aligned: rings are validated with Aligned at setup, and every field
//     accessed here sits at a naturally aligned offset within its ring;
//   - the host is little-endian, as virtio 1.x rings are (amd64, arm64,
//     riscv64, ppc64le); endian_check.go refuses to build elsewhere.
//
// Ordering: sync/atomic loads are acquire and stores are release (in fact
// sequentially consistent) on every Go port, and the compiler does not move
// other memory accesses across them. Go has no 16-bit atomics; the 16-bit
// accessors are single aligned loads and stores, which do not tear, and are
// used only where the ordering comes from a neighbouring atomic or Fence.

import (
	"sync/atomic"
	"unsafe"
)

// Aligned reports whether the first byte of b sits at a host address that is
// a multiple of align (a power of two).
func Aligned(b []byte, align uint64) bool {
	if len(b) == 0 {
		return true
	}
	return uint64(uintptr(unsafe.Pointer(&b[0])))&(align-1) == 0
}

// LoadAcquire32 reads the little-endian 32-bit word at b[off:off+4] with
// acquire ordering: reads after it see what the driver wrote before it.
func LoadAcquire32(b []byte, off int) uint32 {
	_ = b[off+3]
	return atomic.LoadUint32((*uint32)(unsafe.Pointer(&b[off])))
}

// StoreRelease32 writes the 32-bit word at b[off:off+4] with release
// ordering: the driver that sees it also sees every write before it.
func StoreRelease32(b []byte, off int, v uint32) {
	_ = b[off+3]
	atomic.StoreUint32((*uint32)(unsafe.Pointer(&b[off])), v)
}

// Load16 reads the 16-bit field at b[off:off+2] in one access.
func Load16(b []byte, off int) uint16 {
	_ = b[off+1]
	return *(*uint16)(unsafe.Pointer(&b[off]))
}

// Store16 writes the 16-bit field at b[off:off+2] in one access.
func Store16(b []byte, off int, v uint16) {
	_ = b[off+1]
	*(*uint16)(unsafe.Pointer(&b[off])) = v
}

// Fence is a full memory barrier: stores before it are visible before loads
// after it are performed. The virtio protocols need it between publishing
// used entries and reading the driver's event suppression fields, and
// between re-enabling notifications and re-checking the ring. f is any word
// the caller owns (one per ring, so workers do not share a cache line).
func Fence(f *uint32) {
	// An atomic read-modify-write is a full barrier on every Go port
	// (LOCK XADD on amd64, LDADDAL/DMB on arm64).
	atomic.AddUint32(f, 0)
}

// ContainsHost reports whether the host address addr lies inside one of
// m's mappings, or in its dirty log (a front-end can truncate that file
// too). A worker that took a memory fault (a front-end truncated the file
// behind its guest memory) uses it to find which guest did it.
func (m *Memory) ContainsHost(addr uintptr) bool {
	if m.log != nil && m.log.Contains(addr) {
		return true
	}
	for i := range m.regions {
		h := m.regions[i].Host
		if len(h) == 0 {
			continue
		}
		base := uintptr(unsafe.Pointer(&h[0]))
		if addr >= base && addr-base < uintptr(len(h)) {
			return true
		}
	}
	return false
}
