package virtq_test

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/xvswitch/xvswitch/guestmem"
	"github.com/xvswitch/xvswitch/virtq"
	"github.com/xvswitch/xvswitch/virtq/drivertest"
)

// TestStreamsHead: only a buffer that starts a line (a Linux guest's) has
// its head streamed with the frame, and then only where the head's line
// is the guest's whole: the frame runs past it, or the buffer the guest
// gave (its capacity) holds it.
func TestStreamsHead(t *testing.T) {
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
		{"longer than two lines", 0, virtq.WholeMax + 1, 2048, true},
		{"a Linux guest's long frame", 0, virtq.FillHeadLen + 1514, 1536, true},
		{"last line not the guest's", 0, virtq.FillHeadLen + 64, 127, true},
		{"one line, not the guest's whole", 0, virtq.FillHeadLen + 20, 63, false},
		{"a DPDK guest's (the head ends a line)", 64 - virtq.FillHeadLen, virtq.FillHeadLen + 64, 2048, false},
		{"inside a line", 8, virtq.FillHeadLen + 20, 256, false},
	} {
		b := mem[tc.off : tc.off+tc.len : tc.off+tc.cap]
		if got := virtq.StreamsHead(b); got != tc.want {
			t.Errorf("%s: StreamsHead %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestStreamHead: for every length of frame up to a long one, and a
// buffer that holds its last line or ends with the frame, StreamHead
// writes the head and the frame, zeros to the end of the last line where
// the frame is short and the buffer holds that line (whole lines), and
// nothing after that.
func TestStreamHead(t *testing.T) {
	const long = 1600
	mem := alignedBytes(long + 2*guestmem.CacheLine)
	h := virtq.FillHead{Lo: 0x0807060504030201, Hi: 0x0c0b0a09}
	src := make([]byte, long)
	for i := range src {
		src[i] = byte(i + 1)
	}
	for n := 1; n <= long; n++ {
		for _, exact := range []bool{false, true} {
			for i := range mem {
				mem[i] = drivertest.Sentinel
			}
			ln := virtq.FillHeadLen + n
			c := len(mem)
			if exact {
				c = ln
			}
			b := mem[:ln:c]
			if !virtq.StreamsHead(b) {
				continue // one line, not the guest's whole
			}
			h.StreamHead(b, src[:n])
			guestmem.StreamFence()
			if binary.LittleEndian.Uint64(b) != h.Lo || binary.LittleEndian.Uint32(b[8:]) != h.Hi || !bytes.Equal(b[virtq.FillHeadLen:], src[:n]) {
				t.Fatalf("%d bytes, capacity %d: head or frame differs: % x", n, c, b)
			}
			end := ln
			if whole := (ln + guestmem.CacheLine - 1) &^ (guestmem.CacheLine - 1); whole <= virtq.WholeMax && whole <= c {
				end = whole
			}
			if !bytes.Equal(mem[ln:end], make([]byte, end-ln)) || !bytes.Equal(mem[end:], bytes.Repeat([]byte{drivertest.Sentinel}, len(mem)-end)) {
				t.Fatalf("%d bytes, capacity %d: after the frame % x", n, c, mem[ln:min(len(mem), end+64)])
			}
		}
	}
	for _, n := range []int{64, 1514} {
		allocs := testing.AllocsPerRun(100, func() { h.StreamHead(mem[:virtq.FillHeadLen+n], src[:n]) })
		if allocs != 0 {
			t.Errorf("%d bytes: %v allocations a frame", n, allocs)
		}
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
