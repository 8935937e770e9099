package xsk

import "math/bits"

// frameAlloc is a fixed-size free stack of UMEM frames: the userspace stash
// that refills the fill ring and supplies TX frames. It owns frames
// [first, first+count) of the UMEM and never allocates after creation.
//
// The kernel publishes its fill-ring consumer index lazily, so a socket
// keeps more frames than fill slots: the surplus waits here. A bitmap of the
// frames currently in the stack rejects double frees and foreign addresses
// (a bug elsewhere must not hand the same frame to the kernel twice).
type frameAlloc struct {
	stack    []uint64 // frame base addresses (UMEM offsets); stack[:n] are free
	n        int
	isFree   []uint64 // bit i: frame first+i is in the stack
	shift    uint     // log2 of the frame size (2048 or 4096: shifts, not divisions)
	first    uint64   // first frame index owned
	count    uint64   // frames owned
	rejected uint64   // puts refused (foreign address or double free)
}

// newFrameAlloc: frameSize must be a power of two (the UMEM checks it).
func newFrameAlloc(frameSize, first, count uint64) *frameAlloc {
	a := &frameAlloc{
		stack:  make([]uint64, count),
		isFree: make([]uint64, (count+63)/64),
		shift:  uint(bits.TrailingZeros64(frameSize)),
		first:  first,
		count:  count,
	}
	// Push in reverse so the lowest addresses are handed out first.
	for i := count; i > 0; i-- {
		a.put((first + i - 1) << a.shift)
	}
	return a
}

// free is the number of frames in the stash.
func (a *frameAlloc) free() int { return a.n }

// get pops a free frame's base address.
func (a *frameAlloc) get() (uint64, bool) {
	if a.n == 0 {
		return 0, false
	}
	a.n--
	addr := a.stack[a.n]
	i := addr>>a.shift - a.first
	a.isFree[i/64] &^= 1 << (i % 64)
	return addr, true
}

// frameBase maps any address inside one of our frames to its base.
func (a *frameAlloc) frameBase(addr uint64) (uint64, bool) {
	idx := addr >> a.shift
	if idx < a.first || idx-a.first >= a.count {
		return 0, false
	}
	return idx << a.shift, true
}

// put returns the frame holding addr to the stash; false (and counted) if
// the address is not one of ours or the frame is already free.
func (a *frameAlloc) put(addr uint64) bool {
	base, ok := a.frameBase(addr)
	if !ok {
		a.rejected++
		return false
	}
	i := base>>a.shift - a.first
	if a.isFree[i/64]&(1<<(i%64)) != 0 {
		a.rejected++
		return false
	}
	a.isFree[i/64] |= 1 << (i % 64)
	a.stack[a.n] = base
	a.n++
	return true
}
