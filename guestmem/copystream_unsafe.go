package guestmem

import "unsafe"

// CopyStream copies src to the start of dst, as Copy does, but writes the
// whole 64-byte lines of dst it covers with non-temporal stores where the
// CPU has them (amd64): such a store takes a line without reading it first,
// so a frame written into a receive buffer that another CPU read last does
// not wait for that line to come over. The stores are weakly ordered:
// StreamFence must run after them and before the release store that
// publishes the buffers. Returns the bytes copied.
//
// This file uses unsafe: it hands copyLines the first byte of a whole-line
// span inside both d and s (d[head:end], s[head:end], end <= len(d) ==
// len(s)), so the assembly touches nothing outside them; StartsLine only
// reads an address. A guest's buffers may overlap each other: the lines
// then hold bytes of its own making, and nothing outside dst is written.
func CopyStream(dst, src []byte) int {
	n := min(len(dst), len(src))
	if haveStreamStores && n >= CacheLine {
		head := int(-uintptr(unsafe.Pointer(unsafe.SliceData(dst))) & (CacheLine - 1))
		if lines := (n - head) / CacheLine; lines > 0 {
			d, s := dst[:n], src[:n]
			end := head + lines*CacheLine
			if head > 0 {
				copy(d[:head], s[:head])
			}
			copyLines(unsafe.Pointer(&d[head]), unsafe.Pointer(&s[head]), lines)
			if end < n {
				copy(d[end:], s[end:])
			}
			return n
		}
	}
	return Copy(dst, src)
}

// CacheLine is the line size CopyStream streams in: 64 bytes on every
// amd64 CPU.
const CacheLine = 64

// StartsLine reports whether b's first byte starts a cache line.
func StartsLine(b []byte) bool {
	return uintptr(unsafe.Pointer(unsafe.SliceData(b)))&(CacheLine-1) == 0
}
