package virtionet

import "github.com/xvswitch/xvswitch/virtq"

// Frames is a burst of up to virtq.MaxBurst Ethernet frames, each a list of
// byte segments that stay where they are: a UMEM frame is one segment, a
// frame a guest sent is the segments of its TX chain. A TX queue fills one
// per Receive; the caller fills one per destination for an RX queue's
// Deliver (usually with segments taken from another Frames, which costs a
// slice header, not a copy). A worker owns its Frames and reuses them.
//
// Frames holds references only: the bytes must stay valid (the UMEM frame
// not recycled, the TX burst not completed) until the frames are delivered.
type Frames struct {
	n    int
	segs [virtq.MaxBurst][][]byte
	lens [virtq.MaxBurst]int
	// off is each frame's offload metadata, zero for a plain frame.
	off [virtq.MaxBurst]Offload
	// one backs the segment list of frames added with AddBytes, so that a
	// single-segment frame needs no allocation.
	one [virtq.MaxBurst][1][]byte
	// offloaded is false only when no frame in f carries offload
	// metadata (a plain table), so that a sender can tell in one test
	// that it needs to look at none.
	offloaded bool
}

// Reset empties f.
func (f *Frames) Reset() { f.n, f.offloaded = 0, false }

// Len is the number of frames in f.
func (f *Frames) Len() int { return f.n }

// Full reports whether f has no room for another frame.
func (f *Frames) Full() bool { return f.n == virtq.MaxBurst }

// Segments returns the segments of frame i. Callers must not modify the
// returned slice.
func (f *Frames) Segments(i int) [][]byte { return f.segs[i] }

// FrameLen returns the length of frame i in bytes.
func (f *Frames) FrameLen(i int) int { return f.lens[i] }

// Add appends a frame made of segs (referenced, not copied) and reports
// whether there was room.
func (f *Frames) Add(segs [][]byte) bool {
	if f.n == virtq.MaxBurst {
		return false
	}
	n := 0
	for _, s := range segs {
		n += len(s)
	}
	f.set(segs, n)
	return true
}

// AddSized is Add for a caller that knows the frame's length already; n
// must be the sum of the segments' lengths.
func (f *Frames) AddSized(segs [][]byte, n int) bool {
	if f.n == virtq.MaxBurst {
		return false
	}
	f.set(segs, n)
	return true
}

// AddBytes appends a frame of one segment and reports whether there was room.
func (f *Frames) AddBytes(b []byte) bool {
	if f.n == virtq.MaxBurst {
		return false
	}
	f.addOne(b)
	return true
}

// AddOffload is AddSized for a frame with offload metadata: a receiving
// guest gets o in the frame's virtio-net header. The caller checked that
// the guest accepts it (Offloads.Accepts).
func (f *Frames) AddOffload(segs [][]byte, n int, o Offload) bool {
	if f.n == virtq.MaxBurst {
		return false
	}
	f.setOffload(segs, n, o)
	return true
}

// Set, SetBytes and SetOffload fill the table by index, for a caller that
// numbers its frames itself (the switch's burst, vswitch.Burst): Set and
// SetBytes make frame i the table's last, so frames are set in order from
// 0, and leave it plain (no offload).

// Set makes frame i the n bytes of segs (referenced, not copied); n must
// be the sum of the segments' lengths. i must be below virtq.MaxBurst.
func (f *Frames) Set(i int, segs [][]byte, n int) {
	f.segs[i] = segs
	f.lens[i] = n
	f.off[i] = Offload{}
	if i == 0 {
		f.offloaded = false // frame 0 starts the table afresh
	}
	f.n = i + 1
}

// SetBytes makes frame i the one segment b.
func (f *Frames) SetBytes(i int, b []byte) {
	f.one[i][0] = b
	f.Set(i, f.one[i][:], len(b))
}

// SetOffload gives frame i (already set) offload metadata o.
func (f *Frames) SetOffload(i int, o Offload) {
	f.off[i] = o
	f.offloaded = f.offloaded || !o.IsZero()
}

// Exchange swaps frame i of f with frame i of g, for a caller that keeps
// other views of some frames in g (the switch's retagged VLAN views) and
// puts them in f only around one use. The frames' counts stay.
func (f *Frames) Exchange(i int, g *Frames) {
	f.segs[i], g.segs[i] = g.segs[i], f.segs[i]
	f.lens[i], g.lens[i] = g.lens[i], f.lens[i]
	f.off[i], g.off[i] = g.off[i], f.off[i]
	// Either may now hold a frame of the other's: both summaries widen.
	f.offloaded = f.offloaded || g.offloaded
	g.offloaded = f.offloaded
}

// Plain reports that no frame of f carries offload metadata (false: some
// may), so that a sender that handles such frames apart need not look at
// each frame's.
func (f *Frames) Plain() bool { return !f.offloaded }

// Offload returns frame i's offload metadata (zero for a plain frame).
func (f *Frames) Offload(i int) Offload { return f.off[i] }

// addOne appends the frame b of one segment, for AddBytes and the TX queue,
// which checked there is room.
func (f *Frames) addOne(b []byte) {
	f.one[f.n][0] = b
	f.set(f.one[f.n][:], len(b))
}

// set appends a plain frame of n bytes made of segs: with setOffload, the
// one way frames go into the table, keeping its summaries.
func (f *Frames) set(segs [][]byte, n int) {
	f.segs[f.n] = segs
	f.lens[f.n] = n
	f.off[f.n] = Offload{}
	f.n++
}

// setOffload appends a frame with offload metadata o.
func (f *Frames) setOffload(segs [][]byte, n int, o Offload) {
	f.set(segs, n)
	f.SetOffload(f.n-1, o)
}

// Peek copies the first len(dst) bytes of frame i (fewer if the frame is
// shorter) into dst and returns how many it copied. A guest may split even
// the Ethernet header across segments; Peek is how the switch reads MAC
// addresses without caring.
func (f *Frames) Peek(i int, dst []byte) int {
	segs := f.segs[i]
	if len(segs) > 0 && len(segs[0]) >= len(dst) {
		return copy(dst, segs[0])
	}
	n := 0
	for _, s := range segs {
		if n == len(dst) {
			break
		}
		n += copy(dst[n:], s)
	}
	return n
}
