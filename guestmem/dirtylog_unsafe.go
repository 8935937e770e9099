package guestmem

// The dirty log's use of unsafe. Its invariants:
//   - asWords is given a slice whose address NewDirtyLog checked to be
//     8-byte aligned and whose length is a multiple of 8: the []uint64
//     covers exactly the same bytes, so indexing it is bounds-checked
//     against the log area and atomic 64-bit operations on its elements
//     are aligned;
//   - hostContains only compares addresses; it never dereferences one.
//
// The log area and the guest's regions are mappings this process holds
// for as long as a ring may use them (vhost unmaps only after the pollers
// let go), so the pointers never outlive their memory.

import "unsafe"

func asWords(b []byte) []uint64 {
	return unsafe.Slice((*uint64)(unsafe.Pointer(&b[0])), len(b)/8)
}

// hostContains reports whether addr lies in b.
func hostContains(b []byte, addr uintptr) bool {
	if len(b) == 0 {
		return false
	}
	base := uintptr(unsafe.Pointer(&b[0]))
	return addr >= base && addr-base < uintptr(len(b))
}

// hostOffset returns the offset of the first byte of b in h, if b starts
// inside h.
func hostOffset(h, b []byte) (uint64, bool) {
	if len(h) == 0 || len(b) == 0 {
		return 0, false
	}
	base := uintptr(unsafe.Pointer(&h[0]))
	addr := uintptr(unsafe.Pointer(&b[0]))
	if addr < base || addr-base >= uintptr(len(h)) {
		return 0, false
	}
	return uint64(addr - base), true
}
