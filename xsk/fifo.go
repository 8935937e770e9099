package xsk

// txFIFO remembers the frames of submitted TX descriptors in submission
// order. Completions are matched by order, not by the address the kernel
// writes back: copy mode completes in order, and an odd unaligned address
// comes back with bit 0 cleared, so the address cannot identify the frame.
// (The caller-owned path, CallerTX in txaddr.go, matches by key instead:
// it sends no frames of the socket's stash, so no order is assumed.)
type txFIFO struct {
	buf        []uint64
	mask       uint32
	head, tail uint32 // pop at head, push at tail; free-running
}

func newTXFIFO(capacity uint32) *txFIFO {
	n := uint32(1)
	for n < capacity {
		n <<= 1
	}
	return &txFIFO{buf: make([]uint64, n), mask: n - 1}
}

func (f *txFIFO) len() uint32   { return f.tail - f.head }
func (f *txFIFO) space() uint32 { return uint32(len(f.buf)) - f.len() }

func (f *txFIFO) push(frame uint64) {
	f.buf[f.tail&f.mask] = frame
	f.tail++
}

func (f *txFIFO) pop() (uint64, bool) {
	if f.head == f.tail {
		return 0, false
	}
	v := f.buf[f.head&f.mask]
	f.head++
	return v, true
}
