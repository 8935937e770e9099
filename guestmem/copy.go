package guestmem

// Copy copies src to the start of dst, as copy does (dst holds at least
// len(src) bytes in the rings' uses), and returns how many bytes it copied.
//
// A frame of 32 to 64 bytes, the commonest short frame (a minimum-size
// Ethernet frame is 60 bytes, a TCP acknowledgement 54 to 66), goes as two
// 32-byte moves that overlap in the middle, which the compiler inlines:
// runtime.memmove would do the same moves behind a call and a dispatch on
// the length, which cost about as much as the moves themselves. Buffers
// that overlap each other (only a hostile guest's own) get bytes of its
// own making; nothing outside dst is written either way.
func Copy(dst, src []byte) int {
	if l := len(src); l >= 32 && l <= 64 && l <= len(dst) {
		// Both halves loaded before either is stored: that is what
		// lets the compiler move them inline (an assignment between
		// arrays that may overlap goes through memmove).
		a, b := *(*[32]byte)(src[:32]), *(*[32]byte)(src[l-32 : l])
		*(*[32]byte)(dst[:32]) = a
		*(*[32]byte)(dst[l-32 : l]) = b
		return l
	}
	return copy(dst, src)
}
