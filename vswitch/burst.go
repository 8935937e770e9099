package vswitch

import (
	"math/bits"

	"github.com/xvswitch/xvswitch/virtionet"
	"github.com/xvswitch/xvswitch/virtq"
)

// MaxBurst is the most frames a worker moves per poll of one queue: a
// virtqueue burst, so one poll of a guest's ring fills one switch burst.
const MaxBurst = virtq.MaxBurst

// Mask must hold one bit per frame of a burst: this fails to compile
// (constant overflow) if MaxBurst outgrows it.
const _ Mask = 1 << (MaxBurst - 1)

// Frame is a view of one received frame: its bytes as segments of memory
// the switch already has mapped (a UMEM frame, or the translated buffers
// of a guest's TX chain, virtio-net header already skipped). Nothing is
// copied until a destination port transmits it. A Frame is a value read
// out of its burst's table (Burst.Frame): the table is where frames live.
//
// off is the frame's offload metadata, from the virtio-net header of the
// guest that sent it (a partial checksum to complete, a TSO frame to
// segment): zero, as every Set leaves it, for a plain frame, which is every
// frame of a NIC and of a guest without offloads. An egress queue whose
// receiver cannot take it as it is finishes the frame first (segment.go).
type Frame struct {
	segs [][]byte
	len  int
	off  virtionet.Offload
}

// Len is the frame's length in bytes.
func (f Frame) Len() int { return f.len }

// Offload is the frame's offload metadata; zero for a plain frame.
func (f Frame) Offload() virtionet.Offload { return f.off }

// Segments are the frame's bytes, in order; they add up to Len.
func (f Frame) Segments() [][]byte { return f.segs }

// header returns the frame's first n bytes contiguously: see frameHeader.
func (f Frame) header(scratch []byte, n int) (h []byte, ok bool) {
	return frameHeader(f.segs, f.len, scratch, n)
}

// frameHeader returns the first n bytes of the frame of segs (ln bytes in
// all) contiguously: straight from its first segment when they are there
// (the common case), else gathered into scratch. ok is false when the
// frame is shorter than n.
func frameHeader(segs [][]byte, ln int, scratch []byte, n int) (h []byte, ok bool) {
	if ln < n {
		return nil, false
	}
	if len(segs[0]) >= n {
		return segs[0][:n], true
	}
	got := 0
	for _, s := range segs {
		got += copy(scratch[got:n], s)
		if got == n {
			break
		}
	}
	return scratch[:n], true
}

// CopyTo gathers the frame into dst (len(dst) >= Len) and returns the
// bytes copied.
func (f Frame) CopyTo(dst []byte) int {
	n := 0
	for _, s := range f.segs {
		n += copy(dst[n:], s)
	}
	return n
}

// Burst is what an ingress queue's Receive fills: up to MaxBurst frames. A
// worker owns one and reuses it, so no frame costs an allocation.
//
// Its frames are one table, a virtionet.Frames, from ingress to egress:
// the burst's own, filled by Set and SetOne (a UMEM frame, a generated
// one), or, for the length of a burst, the table a guest's TX queue
// filled as it read the guest's chains (useFrames), which the switch
// then reads in place instead of copying each frame's description into
// its own. A guest's RX queue is handed that same table when a burst goes
// to it whole (vhostToGuest.sendAsIs), so a frame's slice header, length
// and offload are written once, where the frame is first seen.
type Burst struct {
	// fr is the ingress queue's table the burst's frames are in, valid
	// until its Release; nil while they are in own (table). forward sets
	// it nil before each Receive, so the queue it came from is never
	// read for another's frames.
	fr  *virtionet.Frames
	own virtionet.Frames
	// worker is the id of the worker owning the burst: the poller a
	// queue that holds state across bursts is held for (vhost.Queue.Hold).
	worker int
	// zc is the zero-copy transmit path of the VM whose TX queue the
	// burst came from, if it owns NIC queues (vmzctx.go); nil otherwise.
	zc *zcTx
}

// SetOne makes frame i the single contiguous buffer b. Frames are set in
// order from 0: frame i is the burst's last until i+1 is set. A burst's
// frames come from one source: Set and SetOne, or useFrames.
func (b *Burst) SetOne(i int, buf []byte) { b.own.SetBytes(i, buf) }

// Set makes frame i the n bytes of segs (which the burst keeps, not
// copies); in order from 0, as SetOne.
func (b *Burst) Set(i int, segs [][]byte, n int) { b.own.Set(i, segs, n) }

// SetOffload gives frame i (already Set) its offload metadata.
func (b *Burst) SetOffload(i int, o virtionet.Offload) { b.table().SetOffload(i, o) }

// useFrames makes f, an ingress queue's own table, the burst's frames
// until the queue's Release: nothing is copied.
func (b *Burst) useFrames(f *virtionet.Frames) { b.fr = f }

// table is the table the burst's frames are in.
func (b *Burst) table() *virtionet.Frames {
	if b.fr != nil {
		return b.fr
	}
	return &b.own
}

// Frame returns frame i of the burst.
func (b *Burst) Frame(i int) Frame { return frameAt(b.table(), i) }

// frameAt reads frame i of table fr as a Frame.
func frameAt(fr *virtionet.Frames, i int) Frame {
	return Frame{segs: fr.Segments(i), len: fr.FrameLen(i), off: fr.Offload(i)}
}

// whole reports whether m selects every frame of the burst's table, and
// nothing else: then the table itself is what m selects.
func (b *Burst) whole(m Mask) bool {
	n := b.table().Len()
	return n > 0 && m == Mask(uint64(1)<<n-1)
}

// Mask is a set of frames of one burst, one bit per index.
type Mask uint32

// Count is how many frames the mask holds.
func (m Mask) Count() int { return bits.OnesCount64(uint64(m)) }

// Lowest is the index of the mask's first frame; iterate with
// `for m := mask; m != 0; m &= m - 1 { i := m.Lowest() ... }`.
func (m Mask) Lowest() int { return bits.TrailingZeros64(uint64(m)) }
