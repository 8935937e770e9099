package virtq

import "encoding/binary"

// FillHeadLen is the bytes a Fill writes in front of each frame: the
// virtio-net header of virtio 1.x (with num_buffers).
const FillHeadLen = 12

// FillHead is the FillHeadLen bytes that go in front of one frame, as two
// little-endian words: the first 8 bytes and the last 4.
type FillHead struct {
	Lo uint64
	Hi uint32
}

// Put writes h at the start of b (FillHeadLen bytes at least) unless b
// holds it already, as DPDK's vhost writes its headers
// (ASSIGN_UNLESS_EQUAL). A guest reads the header of every buffer it
// receives, so the line sits in its core's cache when the device comes
// round to the buffer again; a store must take the line away (a
// cross-core invalidation, serialized behind the stores before it), a
// load need not, and the loads of a run overlap. Guests recycle buffers
// and a plain frame's header is the same every time, so most need no
// store. What the guest finds is the same either way.
func (h *FillHead) Put(b []byte) {
	if binary.LittleEndian.Uint64(b) != h.Lo || binary.LittleEndian.Uint32(b[8:FillHeadLen]) != h.Hi {
		binary.LittleEndian.PutUint64(b, h.Lo)
		binary.LittleEndian.PutUint32(b[8:FillHeadLen], h.Hi)
	}
}

// FillStamps is how a Filler, which records no buffer id in flight (each
// is used before Fill returns), still catches an id given twice in one
// Fill, as Pop catches it: each use stamps the id with the Fill's number.
// Numbers start at 1 (0 is a stamp no Fill made); when they come round,
// every stamp is cleared, so that one made 2^32 Fills ago can never pass
// for one of this Fill. A ring owns one, of its size.
type FillStamps struct {
	of   []uint32
	fill uint32
}

// NewFillStamps returns stamps for ids below size.
func NewFillStamps(size int) FillStamps { return FillStamps{of: make([]uint32, size)} }

// Next numbers a new Fill and returns the stamps, indexed by id, with
// that number.
func (s *FillStamps) Next() ([]uint32, uint32) {
	if s.fill++; s.fill == 0 {
		clear(s.of)
		s.fill = 1
	}
	return s.of, s.fill
}

// FillJob is one Fill's frames: up to MaxBurst, each one segment of bytes
// with the head that goes in front of it. Its user owns one and reuses it,
// so nothing is allocated per frame.
type FillJob struct {
	Src  [MaxBurst][]byte
	Head [MaxBurst]FillHead
	N    int
	// Eager asks for each line of used descriptors to be published as
	// soon as its frames are copied, instead of the whole run at its end:
	// for a guest that is behind (its ring ran dry), which can then take
	// the first frames while the rest are copied. A ring that publishes
	// one index for all (split) ignores it.
	Eager bool
	// Published is how many of the frames an eager Fill has published so
	// far, set as it goes: what a memory fault in the middle of it leaves
	// delivered. A Fill that is not eager leaves it 0.
	Published int
	// Streamed is how many of the frames a Fill wrote with streaming
	// stores (its ring measured them cheaper): set when the Fill returns
	// frames, 0 from an eager Fill and from one a fault interrupted.
	Streamed int
}

// Filler is a ring with a one-pass receive path for the common case of a
// frame that fits the next available buffer whole, the buffer being one
// writable descriptor: it pops that buffer, writes the head and the frame
// into it and returns it used, frame after frame, without the burst, the
// in-flight record and the used list a Pop and Push go through
// (docs/ring-fast-path.md).
type Filler interface {
	// Fill places frames 0.. of j, each into the next available buffer,
	// for as long as that buffer is a chain of one writable descriptor,
	// whose id is not in flight, inside guest memory and long enough for
	// head and frame, and returns how many it placed; they are used and
	// published (one Push's worth) when it returns. The buffer that stops
	// it is left untouched, for Pop to take (and to say what is wrong
	// with it). It places none when the ring cannot take this path at all
	// (broken, IN_ORDER, writes being logged, a transmit ring). A non-nil
	// error means the driver gave one id twice in the run: the ring is
	// broken, as Pop's errors break it, and nothing was placed.
	//
	// A memory fault in the middle of it (a front-end truncated the
	// memory behind a buffer or a frame) leaves the ring as it was: no
	// buffer popped, none used; heads and frames may have been written
	// into buffers the driver still owns, which it overwrites or ignores.
	// An eager Fill (FillJob.Eager) leaves the ring as it was after the
	// frames it published before the fault (FillJob.Published), which the
	// driver has.
	Fill(j *FillJob) (int, error)
}
