package guestmem_test

import (
	"testing"

	"github.com/xvswitch/xvswitch/guestmem"
)

// The accessors read and write ring fields little-endian, in place.
func TestAccessLayout(t *testing.T) {
	b := make([]byte, 16)
	for !guestmem.Aligned(b, 4) {
		b = make([]byte, 16)
	}
	guestmem.StoreRelease32(b, 4, 0x11223344)
	if b[4] != 0x44 || b[5] != 0x33 || b[6] != 0x22 || b[7] != 0x11 || b[3] != 0 || b[8] != 0 {
		t.Fatalf("StoreRelease32 wrote % x", b)
	}
	if v := guestmem.LoadAcquire32(b, 4); v != 0x11223344 {
		t.Fatalf("LoadAcquire32 = %#x", v)
	}
	// flags|idx<<16: the idx half is the second 16-bit field.
	if v := guestmem.Load16(b, 6); v != 0x1122 {
		t.Fatalf("Load16 = %#x", v)
	}
	guestmem.Store16(b, 10, 0xabcd)
	if b[10] != 0xcd || b[11] != 0xab || b[9] != 0 || b[12] != 0 {
		t.Fatalf("Store16 wrote % x", b)
	}
	var f uint32
	guestmem.Fence(&f)
	if f != 0 {
		t.Fatalf("Fence changed its word to %d", f)
	}
}

// An accessor given an offset past its slice panics like an index
// expression (bounds check) instead of touching the memory after it.
func TestAccessBounds(t *testing.T) {
	b := make([]byte, 8)
	for name, f := range map[string]func(){
		"LoadAcquire32":  func() { guestmem.LoadAcquire32(b[:7], 4) },
		"StoreRelease32": func() { guestmem.StoreRelease32(b[:7], 4, 1) },
		"Load16":         func() { guestmem.Load16(b[:7], 6) },
		"Store16":        func() { guestmem.Store16(b[:7], 6, 1) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s past the end did not panic", name)
				}
			}()
			f()
		}()
		if b[7] != 0 {
			t.Fatalf("%s wrote past the end of its slice", name)
		}
	}
}

func TestAligned(t *testing.T) {
	b := make([]byte, 64)
	i := 0
	for !guestmem.Aligned(b[i:], 16) {
		i++
	}
	if guestmem.Aligned(b[i+2:], 4) || !guestmem.Aligned(b[i+2:], 2) || !guestmem.Aligned(b[i+4:], 4) || guestmem.Aligned(b[i+4:], 8) {
		t.Fatal("Aligned disagrees with offsets from a 16-aligned byte")
	}
	if !guestmem.Aligned(nil, 4096) {
		t.Fatal("an empty slice is aligned")
	}
}
