package virtq

import (
	"encoding/binary"

	"github.com/xvswitch/xvswitch/guestmem"
)

// WholeMax is the longest head and frame a Filler writes as whole lines
// with streaming stores: two cache lines, a short frame.
const WholeMax = 2 * guestmem.CacheLine

// StreamsHead reports whether a Filler that streams writes buffer b (head
// and frame, the first len(b) bytes of the buffer) with its head's line
// streamed (FillHead.StreamHead). b must start a line, as a Linux guest's
// receive buffers do: the head first and the frame FillHeadLen bytes in,
// so that head and frame share the line the guest read last. Then either
// the frame runs past that line (the line is streamed, the rest copied
// ordinarily) or the buffer the guest gave, cap(b), holds b's last line
// whole: a short frame (WholeMax at most) goes as whole lines, zeros
// after it. The virtio spec lets a device write more of a buffer than
// the length it reports as used.
func StreamsHead(b []byte) bool {
	return guestmem.StartsLine(b) && (len(b) > guestmem.CacheLine || cap(b) >= guestmem.CacheLine)
}

// StreamHead writes h and frame src into b (FillHeadLen+len(src) bytes,
// as StreamsHead allowed): a short frame whose last line the buffer holds
// goes as whole lines with streaming stores (the head, the frame, zeros to
// the end of the last line); a longer one has its first line, the head and
// the frame's first bytes, streamed and the rest copied. guestmem.StreamFence
// must run before the buffer is published.
func (h *FillHead) StreamHead(b, src []byte) {
	var lines [WholeMax]byte
	binary.LittleEndian.PutUint64(lines[:], h.Lo)
	binary.LittleEndian.PutUint32(lines[8:FillHeadLen], h.Hi)
	if n := wholeLen(len(b)); n <= WholeMax && n <= cap(b) {
		copy(lines[FillHeadLen:], src)
		guestmem.CopyStream(b[:n], lines[:n])
		return
	}
	const first = guestmem.CacheLine - FillHeadLen // the frame's bytes in the head's line
	copy(lines[FillHeadLen:guestmem.CacheLine], src)
	guestmem.CopyStream(b[:guestmem.CacheLine], lines[:guestmem.CacheLine])
	guestmem.Copy(b[guestmem.CacheLine:], src[first:])
}

// wholeLen is n rounded up to whole lines.
func wholeLen(n int) int { return (n + guestmem.CacheLine - 1) &^ (guestmem.CacheLine - 1) }
