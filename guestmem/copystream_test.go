package guestmem

import (
	"bytes"
	"errors"
	"testing"
	"unsafe"
)

// TestCopyStream: every length up to 300 at every offset within a line,
// into room enough and into less: the bytes copy gives, its count, nothing
// written before or past them, whichever lines went as streaming stores.
func TestCopyStream(t *testing.T) {
	src := make([]byte, 300+CacheLine)
	for i := range src {
		src[i] = byte(i*7 + 1)
	}
	back := make([]byte, 4*CacheLine+len(src))
	base := int(-uintptr(unsafe.Pointer(&back[0])) & (CacheLine - 1)) // back[base] starts a line
	for off := 0; off < CacheLine; off++ {
		for l := 0; l <= 300; l++ {
			for _, room := range []int{l + 20, l / 2} {
				clear(back)
				at := base + CacheLine + off
				s := src[off%5 : off%5+l] // the source at another alignment
				n := CopyStream(back[at:at+room], s)
				StreamFence()
				want := min(l, room)
				if n != want || !bytes.Equal(back[at:at+want], s[:want]) {
					t.Fatalf("offset %d, length %d into %d: copied %d, want %d and the same bytes", off, l, room, n, want)
				}
				for i := range back {
					if (i < at || i >= at+want) && back[i] != 0 {
						t.Fatalf("offset %d, length %d into %d: byte %d written", off, l, room, i-at)
					}
				}
			}
		}
	}
	dst := back[base : base+2*CacheLine]
	if n := testing.AllocsPerRun(100, func() { CopyStream(dst, src[:CacheLine+8]) }); n != 0 {
		t.Fatalf("%v allocations", n)
	}
}

// TestCopyStreamFault: a streaming copy into a page whose file was
// truncated faults as an ordinary one does, recovered by Protect with the
// address inside the page.
func TestCopyStreamFault(t *testing.T) {
	b := truncatedMapping(t)
	base := uintptr(unsafe.Pointer(&b[0]))
	owns := func(a uintptr) bool { return a >= base && a < base+uintptr(len(b)) }
	src := make([]byte, 256)
	err := Protect(owns, func() { CopyStream(b[CacheLine:], src) })
	var fe *FaultError
	if !errors.Is(err, ErrFault) || !errors.As(err, &fe) || !owns(fe.Addr) {
		t.Fatalf("streaming copy into a truncated page: %v", err)
	}
}
