package guestmem

import (
	"bytes"
	"math/rand"
	"testing"
)

// TestHint: Hint.Translate agrees with Memory.Translate on every buffer,
// whichever region the hint holds.
func TestHint(t *testing.T) {
	mk := func(base uint64) *Memory {
		m, err := New([]Region{
			{GuestAddr: base, Size: 4096, UserAddr: 1 << 40, Host: make([]byte, 4096)},
			{GuestAddr: base + 4096, Size: 8192, UserAddr: 2 << 40, Host: make([]byte, 8192)},
			{GuestAddr: base + 1<<20, Size: 4096, UserAddr: 3 << 40, Host: make([]byte, 4096)},
		})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	m, other := mk(0x10000), mk(0x90000)
	rnd := rand.New(rand.NewSource(1))
	h, hOther := m.NewHint(), other.NewHint()
	for i := 0; i < 20000; i++ {
		gpa := 0x10000 + uint64(rnd.Intn(1<<20+8192)) - 4096
		n := uint64(rnd.Intn(9000))
		if i%97 == 0 {
			n = ^uint64(0) - uint64(rnd.Intn(5)) // overflowing lengths
		}
		want, werr := m.Translate(gpa, n)
		got, ok := h.Translate(gpa, n)
		if ok != (werr == nil) || ok && (len(got) != len(want) || len(got) > 0 && &got[0] != &want[0]) {
			t.Fatalf("%#x+%d: hinted ok=%v len %d, Translate err=%v len %d", gpa, n, ok, len(got), werr, len(want))
		}
		if i%13 == 0 {
			// Hints are per Memory: the other table's never affects m's.
			if _, ok := hOther.Translate(0x90000+8, 8); !ok {
				t.Fatal("other table: miss")
			}
		}
	}
	// Bytes really are the region's.
	m.regions[1].Host[100] = 7
	b, ok := h.Translate(0x10000+4096+100, 1)
	if !ok || !bytes.Equal(b, []byte{7}) {
		t.Fatalf("got %v %v", b, ok)
	}
}
