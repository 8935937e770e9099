package virtionet

import (
	"github.com/xvswitch/xvswitch/virtq"
)

// The receive fast path (docs/ring-fast-path.md): a run of frames of one
// segment each (a UMEM frame, a guest's single-descriptor TX buffer), each
// going whole into one receive buffer of one segment (what Linux and DPDK
// guests post). Deliver tries it before the general placeOne/placeMerged
// and falls back to them for whatever frame ends the run.
//
// It is software-pipelined, because the copy into guest memory is where
// the time goes and most of it is cache misses: on receive buffers nobody
// touched recently, and on frames another core (another guest) wrote last.
// Go has no prefetch instruction, so the run is done in passes: the
// buffers are popped for the whole run first (refill's estimate), then
// every destination gets its header (two fixed-size stores) and every
// source gets one load, so that the CPU has all the run's misses in flight
// at once, and only then are the frame bodies copied.
//
// What the general path guarantees still holds: a frame's buffer is
// staged as used only once the frame is written whole (the run is staged
// after its last copy, so a memory fault in any pass leaves the whole run
// unstaged, counted by unwind as memory_fault drops, its buffers held); buffers are used in the order
// popped; nothing is written past a buffer's translated bytes (each
// destination is checked to hold header and frame before the first pass).

// placeRun delivers frames i.. of f that qualify for the fast path, up to
// the first that does not or the end of the oldest held burst, and returns
// how many it placed (0: frame i needs the general path).
func (q *RxQueue) placeRun(f *Frames, i int) int {
	// Frame i is checked before refilling, so that a frame the general
	// path drops without a buffer (too long) pops none here either.
	if q.hdrLen != HeaderLen || !q.fastFrame(f, i) {
		return 0
	}
	if q.left() == 0 && !q.refill(f, i) {
		return 0
	}
	b := &q.bursts[q.cur]
	next := q.next
	n := min(f.n-i, b.N-next, usedCap-q.nused)
	q.unplaced = f.n - i
	// Pass 1: check each frame and its buffer, write the header into the
	// buffer and load the frame's first byte.
	var t byte
	// Each buffer's bytes, found once here for pass 2 as well.
	var dsts [virtq.MaxBurst][]byte
	k := 0
	for ; k < n; k++ {
		if !q.fastFrame(f, i+k) {
			break
		}
		src := f.segs[i+k][0]
		dst := b.WritableOne(next + k)
		if len(dst) < HeaderLen+len(src) {
			break
		}
		dsts[k] = dst
		lo, hi := f.rxHeader(i+k, 1)
		(&virtq.FillHead{Lo: lo, Hi: hi}).Put(dst)
		t ^= src[0]
	}
	if k == 0 {
		return 0
	}
	q.touched = t
	// Pass 2: the frames, each followed by its used entry. The entries go
	// into q.used beyond q.nused, where nothing reads them until nused
	// moves past them below, after the last copy: a fault in any copy
	// still leaves nothing of the run staged. One loop instead of a copy
	// pass and a staging pass saves the second walk over the chains and
	// frames. While the guest migrates, each buffer is marked in the
	// dirty log once it is written (dirtylog.go).
	used := q.used[q.nused : q.nused+k]
	chains := b.Chains[next : next+k]
	segs := f.segs[i : i+k]
	bytes := 0
	for j := range used {
		src, dst := segs[j][0], dsts[j]
		copy(dst[HeaderLen:], src)
		if q.dirty != nil {
			q.dirty.LogWrite(dst[:HeaderLen+len(src)])
		}
		c := &chains[j]
		used[j] = virtq.Used{ID: c.ID, Descs: c.Descs, Len: uint32(HeaderLen + len(src))}
		bytes += len(src)
	}
	q.nused += k
	q.letGo(k)
	q.stagedFrames += k
	q.stagedBytes += bytes
	return k
}

// fastFrame reports whether frame i of f is one segment that the guest
// may receive.
func (q *RxQueue) fastFrame(f *Frames, i int) bool {
	segs, ln := f.segs[i], f.lens[i]
	return len(segs) == 1 && len(segs[0]) == ln && ln != 0 && ln <= q.maxFrame
}

// rxHeader is the virtio-net header frame i of f gets in front of it in a
// guest's receive buffers when it takes numBuffers of them, as its first
// 8 bytes and its last 4 (little-endian words, in registers: a header
// built in memory and copied out stalls on store forwarding). The offload
// fields come from the frame's metadata, kept in the header's own words
// (Offload), so that every header costs the same two stores whatever it
// carries; a plain frame's are zero.
func (f *Frames) rxHeader(i, numBuffers int) (lo uint64, hi uint32) {
	o := &f.off[i]
	return o.lo, uint32(o.csumOffset) | uint32(uint16(numBuffers))<<((numBuffersOff-8)*8)
}
