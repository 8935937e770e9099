package guestmem

import (
	"bytes"
	"testing"
)

// TestCopy: every length up to 130 into a larger buffer and into a
// shorter one: the bytes copy gives, the count copy returns, nothing
// written past them.
func TestCopy(t *testing.T) {
	src := make([]byte, 130)
	for i := range src {
		src[i] = byte(i + 1)
	}
	for l := 0; l <= len(src); l++ {
		for _, room := range []int{l + 20, l / 2} {
			dst := make([]byte, room+8)
			n := Copy(dst[:room], src[:l])
			want := min(l, room)
			if n != want || !bytes.Equal(dst[:want], src[:want]) {
				t.Fatalf("length %d into %d: copied %d, want %d and the same bytes", l, room, n, want)
			}
			for i := want; i < len(dst); i++ {
				if dst[i] != 0 {
					t.Fatalf("length %d into %d: byte %d written", l, room, i)
				}
			}
		}
	}
	if n := testing.AllocsPerRun(100, func() { Copy(src[64:], src[:60]) }); n != 0 {
		t.Fatalf("%v allocations", n)
	}
}
