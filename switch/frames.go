package vswitch

// MaxBurst is the most frames a worker moves per poll of one queue.
const MaxBurst = 32

// frame is a view of one received frame: its bytes as segments of memory
// the switch already has mapped (a UMEM frame, or the translated buffers
// of a guest's TX chain, virtio-net header already skipped). Nothing is
// copied until a destination port transmits it.
type frame struct {
	segs [][]byte
	len  int
}

// frameBurst is what a port's receive fills: up to MaxBurst frames. A
// worker owns one per polled queue and reuses it, so no frame costs an
// allocation. one backs the single segment of frames that arrive in one
// piece (AF_XDP), so they need no slice of their own.
type frameBurst struct {
	f   [MaxBurst]frame
	one [MaxBurst][1][]byte
}

// setOne makes frame i the single contiguous buffer b.
func (fb *frameBurst) setOne(i int, b []byte) {
	fb.one[i][0] = b
	fb.f[i] = frame{segs: fb.one[i][:], len: len(b)}
}

// header returns the frame's first n bytes contiguously: straight from its
// first segment when they are there (the common case), else gathered into
// scratch. ok is false when the frame is shorter than n.
func (f *frame) header(scratch []byte, n int) (h []byte, ok bool) {
	if f.len < n {
		return nil, false
	}
	if len(f.segs[0]) >= n {
		return f.segs[0][:n], true
	}
	got := 0
	for _, s := range f.segs {
		got += copy(scratch[got:n], s)
		if got == n {
			break
		}
	}
	return scratch[:n], true
}

// copyTo gathers the frame into dst (len(dst) >= f.len) and returns the
// bytes copied.
func (f *frame) copyTo(dst []byte) int {
	n := 0
	for _, s := range f.segs {
		n += copy(dst[n:], s)
	}
	return n
}

// frameMask is a set of frames of one burst, one bit per index.
type frameMask uint32
