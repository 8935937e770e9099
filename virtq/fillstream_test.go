package virtq_test

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/xvswitch/xvswitch/guestmem"
	"github.com/xvswitch/xvswitch/virtq"
	"github.com/xvswitch/xvswitch/virtq/drivertest"
)

// TestStreamsWhole: only a buffer that starts a line, holds at most
// WholeMax bytes of head and frame, and whose capacity (the buffer the
// guest gave) holds its last line whole may be written as whole lines.
func TestStreamsWhole(t *testing.T) {
	mem := alignedBytes(4096)
	for _, tc := range []struct {
		name     string
		off, len int
		cap      int
		want     bool
	}{
		{"a Linux guest's short frame", 0, virtq.FillHeadLen + 64, 2048, true},
		{"the shortest", 0, virtq.FillHeadLen + 1, 64, true},
		{"two lines exactly", 0, virtq.WholeMax, virtq.WholeMax, true},
		{"longer than two lines", 0, virtq.WholeMax + 1, 2048, false},
		{"last line not the guest's", 0, virtq.FillHeadLen + 64, 127, false},
		{"a DPDK guest's (the head ends a line)", 64 - virtq.FillHeadLen, virtq.FillHeadLen + 64, 2048, false},
		{"inside a line", 8, virtq.FillHeadLen + 20, 256, false},
	} {
		b := mem[tc.off : tc.off+tc.len : tc.off+tc.cap]
		if got := virtq.StreamsWhole(b); got != tc.want {
			t.Errorf("%s: StreamsWhole %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestStreamWhole: every length of frame that fits writes the head, the
// frame, zeros to the end of its last line, and nothing after that.
func TestStreamWhole(t *testing.T) {
	mem := alignedBytes(256)
	h := virtq.FillHead{Lo: 0x0807060504030201, Hi: 0x0c0b0a09}
	for n := 1; n <= virtq.WholeMax-virtq.FillHeadLen; n++ {
		for i := range mem {
			mem[i] = drivertest.Sentinel
		}
		src := make([]byte, n)
		for i := range src {
			src[i] = byte(i + 1)
		}
		b := mem[:virtq.FillHeadLen+n]
		if !virtq.StreamsWhole(b) {
			t.Fatalf("%d bytes: not whole", n)
		}
		h.StreamWhole(b, src)
		guestmem.StreamFence()
		if binary.LittleEndian.Uint64(b) != h.Lo || binary.LittleEndian.Uint32(b[8:]) != h.Hi || !bytes.Equal(b[virtq.FillHeadLen:], src) {
			t.Fatalf("%d bytes: head or frame differs: % x", n, b)
		}
		end := (len(b) + guestmem.CacheLine - 1) &^ (guestmem.CacheLine - 1)
		if !bytes.Equal(mem[len(b):end], make([]byte, end-len(b))) || !bytes.Equal(mem[end:], bytes.Repeat([]byte{drivertest.Sentinel}, len(mem)-end)) {
			t.Fatalf("%d bytes: after the frame % x", n, mem[len(b):])
		}
	}
	allocs := testing.AllocsPerRun(100, func() { h.StreamWhole(mem[:76], mem[128:192]) })
	if allocs != 0 {
		t.Errorf("%v allocations a frame", allocs)
	}
}

// alignedBytes returns n bytes that start a cache line.
func alignedBytes(n int) []byte {
	b := make([]byte, n+guestmem.CacheLine)
	for !guestmem.StartsLine(b) {
		b = b[1:]
	}
	return b[:n]
}
