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
// copied until a destination port transmits it.
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
func (f *Frame) Len() int { return f.len }

// Offload is the frame's offload metadata; zero for a plain frame.
func (f *Frame) Offload() virtionet.Offload { return f.off }

// Segments are the frame's bytes, in order; they add up to Len.
func (f *Frame) Segments() [][]byte { return f.segs }

// header returns the frame's first n bytes contiguously: straight from its
// first segment when they are there (the common case), else gathered into
// scratch. ok is false when the frame is shorter than n.
func (f *Frame) header(scratch []byte, n int) (h []byte, ok bool) {
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

// CopyTo gathers the frame into dst (len(dst) >= Len) and returns the
// bytes copied.
func (f *Frame) CopyTo(dst []byte) int {
	n := 0
	for _, s := range f.segs {
		n += copy(dst[n:], s)
	}
	return n
}

// Burst is what an ingress queue's Receive fills: up to MaxBurst frames. A
// worker owns one and reuses it, so no frame costs an allocation. one
// backs the single segment of frames that arrive in one piece (AF_XDP), so
// they need no slice of their own.
type Burst struct {
	f   [MaxBurst]Frame
	one [MaxBurst][1][]byte
	// worker is the id of the worker owning the burst: the poller a
	// queue that holds state across bursts is held for (vhost.Queue.Hold).
	worker int
	// zc is the zero-copy transmit path of the VM whose TX queue the
	// burst came from, if it owns NIC queues (vmzctx.go); nil otherwise.
	zc *zcTx
}

// SetOne makes frame i the single contiguous buffer b.
func (b *Burst) SetOne(i int, buf []byte) {
	b.one[i][0] = buf
	b.f[i] = Frame{segs: b.one[i][:], len: len(buf)}
}

// Set makes frame i the n bytes of segs (which the burst keeps, not copies).
func (b *Burst) Set(i int, segs [][]byte, n int) {
	b.f[i] = Frame{segs: segs, len: n}
}

// SetOffload gives frame i (already Set) its offload metadata.
func (b *Burst) SetOffload(i int, o virtionet.Offload) { b.f[i].off = o }

// Frame returns frame i of the burst.
func (b *Burst) Frame(i int) *Frame { return &b.f[i] }

// Mask is a set of frames of one burst, one bit per index.
type Mask uint32

// Count is how many frames the mask holds.
func (m Mask) Count() int { return bits.OnesCount64(uint64(m)) }

// Lowest is the index of the mask's first frame; iterate with
// `for m := mask; m != 0; m &= m - 1 { i := m.Lowest() ... }`.
func (m Mask) Lowest() int { return bits.TrailingZeros64(uint64(m)) }
