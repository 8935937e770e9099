package packed_test

// This file uses unsafe to compare host addresses. Its invariant: it only
// reads slice headers (pointer and length) and never dereferences.

import (
	"unsafe"

	"github.com/xvswitch/xvswitch/virtq/drivertest"
)

// inGuest reports whether every byte of seg lies inside one region of m's
// host mappings: what the ring hands out must never reach elsewhere.
func inGuest(m *drivertest.Mem, seg []byte) bool {
	if len(seg) == 0 {
		return false // the ring never yields empty segments
	}
	p := uintptr(unsafe.Pointer(unsafe.SliceData(seg)))
	for _, r := range m.Regions {
		h := uintptr(unsafe.Pointer(unsafe.SliceData(r.Host)))
		if p >= h && p-h < uintptr(r.Size) && uintptr(len(seg)) <= uintptr(r.Size)-(p-h) {
			return true
		}
	}
	return false
}
