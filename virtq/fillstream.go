package virtq

import (
	"encoding/binary"

	"github.com/xvswitch/xvswitch/guestmem"
)

// WholeMax is the longest head and frame a Filler writes as whole lines
// with streaming stores: two cache lines, a short frame.
const WholeMax = 2 * guestmem.CacheLine

// StreamsWhole reports whether a Filler that streams may write buffer b,
// head and frame (the first len(b) bytes of the buffer), as whole lines
// (FillHead.StreamWhole): b starts a line, as a Linux guest's receive
// buffers do (the head first, the frame FillHeadLen bytes in, so that the
// frame has no line of its own), it fits in WholeMax, and the buffer the
// guest gave, cap(b), holds every byte of its last line, which is written
// whole, zeros after the frame. The virtio spec lets a device write more
// of a buffer than the length it reports as used.
func StreamsWhole(b []byte) bool {
	return guestmem.StartsLine(b) && len(b) <= WholeMax && cap(b) >= wholeLen(len(b))
}

// StreamWhole writes h and frame src into b (FillHeadLen+len(src) bytes,
// as StreamsWhole allowed) with streaming stores: the head, the frame,
// zeros to the end of the last line. guestmem.StreamFence must run before
// the buffer is published.
func (h *FillHead) StreamWhole(b, src []byte) {
	var lines [WholeMax]byte
	binary.LittleEndian.PutUint64(lines[:], h.Lo)
	binary.LittleEndian.PutUint32(lines[8:FillHeadLen], h.Hi)
	copy(lines[FillHeadLen:], src)
	n := wholeLen(len(b))
	guestmem.CopyStream(b[:n], lines[:n])
}

// wholeLen is n rounded up to whole lines.
func wholeLen(n int) int { return (n + guestmem.CacheLine - 1) &^ (guestmem.CacheLine - 1) }
