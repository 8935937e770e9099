package vswitch

import "unsafe"

// hostAddr is the address of b's first byte (0 for an empty b). It only
// reads the slice header: the address is compared against a range the
// caller mapped (vmzerocopy.go), never turned back into a pointer, so it
// keeps nothing alive and cannot reach memory by itself.
func hostAddr(b []byte) uintptr {
	if len(b) == 0 {
		return 0
	}
	return uintptr(unsafe.Pointer(unsafe.SliceData(b)))
}
