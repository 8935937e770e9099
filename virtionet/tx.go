package virtionet

import (
	"encoding/binary"
	"sync/atomic"

	"github.com/xvswitch/xvswitch/virtq"
)

// TxQueue is the device side of a guest's transmit queue (virtqueue 2k+1):
// it pops the chains the guest sent and presents each as the frame's
// segments in guest memory, the virtio-net header skipped. The caller copies
// the frames out (to a NIC's UMEM or into another guest's RX buffers) and
// then calls Complete, which gives the buffers back to the guest.
//
// A TxQueue is owned by one worker; see the package doc.
type TxQueue struct {
	queueBase
	// taker is the ring's one-pass transmit path, or nil (virtq.Taker).
	taker virtq.Taker
	// take holds the chains of the last Receive: the ones Take popped,
	// then the ones Pop put in burst; take.Used is every chain's used
	// entry, in that order, for Complete.
	take    virtq.TakeJob
	burst   virtq.Burst
	frames  Frames
	pending int // chains of the last Receive not yet completed
	// chainOf is the chain index (in take.Used) of each frame of Frames;
	// held is what Hold keeps past Complete (txhold.go).
	chainOf [virtq.MaxBurst]uint8
	held    txHeld
	// resumeDropped: chains the ring's start completed unsent
	// (resumedrops.go), for the next Receive to count.
	resumeDropped atomic.Uint32
}

// NewTxQueue returns a TX queue over ring (nil for a stopped queue).
func NewTxQueue(ring virtq.Ring, cfg QueueConfig) *TxQueue {
	q := &TxQueue{}
	q.init(ring, cfg)
	q.taker = takerOf(ring)
	return q
}

// Receive pops up to max (at most virtq.MaxBurst) chains the guest made
// available and returns how many it popped; 0 means the ring is empty.
// The valid ones are in Frames() until Complete. Chains that are not a
// usable frame are counted as drops (malformed, too long) and completed with
// the rest. A pending burst not yet completed is completed first.
//
// A non-nil error means the guest broke the ring: the queue is broken for
// good, the chains in flight are counted as ring_broken, and the device
// owning it should be marked broken.
func (q *TxQueue) Receive(max int) (int, error) {
	if q.pending > 0 {
		if err := q.Complete(); err != nil {
			return 0, err
		}
	}
	q.returnAbandoned()
	q.frames.Reset()
	q.ctr.begin()
	if q.resumeDropped.Load() != 0 {
		q.countResumeDrops()
	}
	if q.err != nil {
		return 0, q.err
	}
	if q.ring == nil || max <= 0 {
		return 0, nil
	}
	if max > virtq.MaxBurst {
		max = virtq.MaxBurst
	}
	// The one-pass path first (virtq.Taker), then Pop for what stopped
	// it: chains, indirect tables, a buffer over two regions, a ring
	// without the path, and whatever is wrong, which Pop finds.
	j, b := &q.take, &q.burst
	k, n, more := 0, 0, true
	if q.taker != nil {
		k, more = q.taker.Take(j, max), j.More
	}
	b.Reset()
	if k < max && more {
		var err error
		if n, err = q.ring.Pop(b, max-k); err != nil {
			q.ctr.drop(DropRingBroken, k) // the chains taken before it
			q.fail("pop", err)
			q.ctr.publish()
			return 0, q.err
		}
	}
	// The short way, for what Linux and DPDK guests send (shortWay):
	// one readable buffer holding the header and a frame the switch
	// passes. Any other chain goes the general way (receiveChain), which
	// would take the same frame from these.
	sw := q.shortWay()
	i, bytes := q.shortRun(k, sw)
	for ; i < k; i++ {
		if seg := j.Bufs[i]; sw.takes(seg) {
			bytes += q.addShort(i, seg)
			continue
		}
		bytes += q.receiveChain(i, j.Bufs[i:i+1], false)
	}
	for i := 0; i < n; i++ {
		c := &b.Chains[i]
		j.Used[k+i] = virtq.Used{ID: c.ID, Descs: c.Descs}
		if seg := b.ReadableOne(i); sw.takes(seg) {
			bytes += q.addShort(k+i, seg)
			continue
		}
		bytes += q.receiveChain(k+i, b.Readable(i), c.Malformed || c.WriteLen != 0 || len(b.Writable(i)) != 0)
	}
	n += k
	q.pending = n
	q.ctr.pass(q.frames.n, bytes)
	q.ctr.publish()
	return n, nil
}

// shortWay is the test a chain's one readable buffer passes to go the
// short way: a length the general way would pass (an Ethernet header at
// least, the MTU's frame at most, after the virtio-net header) and, from
// a guest that negotiated offloads, a header that asks for none (neither
// NEEDS_CSUM nor a GSO type: header bytes 0 and 1, little-endian; what
// DPDK writes for a frame it asks nothing for). A guest without offloads
// has its header ignored and unread (general is 0): the header has a
// cache line of its own in front of the frame in DPDK's buffers, which
// the guest writes again for its next frame, and a line this CPU read
// must be taken back from it first (DPDK's vhost reads the header only
// with offloads too). Made once per Receive.
type shortWay struct {
	short, long int
	general     uint16
}

func (q *TxQueue) shortWay() shortWay {
	w := shortWay{short: q.hdrLen + EthHeaderLen, long: q.hdrLen + q.maxFrame}
	if q.offl.Csum {
		w.general = 0xff00 | FlagNeedsCsum
	}
	return w
}

// takes reports whether seg goes the short way.
func (w shortWay) takes(seg []byte) bool {
	return len(seg) >= w.short && len(seg) <= w.long && (w.general == 0 || binary.LittleEndian.Uint16(seg)&w.general == 0)
}

// addShort puts the frame of seg, chain u's one buffer (its index in
// q.take.Used), into the frame table past the header and returns its
// bytes.
func (q *TxQueue) addShort(u int, seg []byte) int {
	q.chainOf[q.frames.n] = uint8(u)
	q.frames.addOne(seg[q.hdrLen:])
	return len(seg) - q.hdrLen
}

// shortRun puts the first chains Take took into the empty frame table,
// for as long as each goes the short way (sw), and returns how many it
// put and their bytes. It writes the table's arrays directly, frame i at
// index i, with the count and the offloads (all zero: Reset left the
// table plain) set once for the run: what addShort does per frame, less
// the per-frame count and offload stores.
func (q *TxQueue) shortRun(k int, sw shortWay) (int, int) {
	f, hdr := &q.frames, q.hdrLen
	bufs := q.take.Bufs[:k]
	bytes, i := 0, 0
	for ; i < len(bufs); i++ {
		seg := bufs[i]
		if !sw.takes(seg) {
			break
		}
		f.one[i][0] = seg[hdr:]
		f.segs[i] = f.one[i][:]
		f.lens[i] = len(seg) - hdr
		q.chainOf[i] = uint8(i)
		bytes += len(seg) - hdr
	}
	clear(f.off[:i])
	f.n = i
	return i, bytes
}

// receiveChain takes chain u of the last Receive (its index in q.take.Used)
// the general way: segs are its readable segments, bad says it is
// malformed or has writable buffers (dropped as malformed). The frame goes
// into q.frames with the offload its header asks for, or is counted as a
// drop. It returns the frame's bytes (0 for a drop).
func (q *TxQueue) receiveChain(u int, segs [][]byte, bad bool) int {
	if bad {
		q.ctr.drop(DropMalformed, 1)
		return 0
	}
	var off Offload
	if q.offl.Csum {
		// Only a guest that negotiated an offload has a header worth
		// reading; the others' headers are ignored, as the spec lets a
		// device do (and as xvswitch always did).
		off = readOffload(segs)
	}
	segs, flen, ok := skipHeader(segs, q.hdrLen)
	if !ok || flen < EthHeaderLen {
		q.ctr.drop(DropMalformed, 1)
		return 0
	}
	if !off.IsZero() {
		var why DropReason
		if off, why, ok = q.offl.checkOffload(off, flen); !ok {
			q.ctr.drop(why, 1)
			return 0
		}
	}
	if flen > q.maxFrame && !off.GSO() {
		q.ctr.drop(DropTooLong, 1)
		return 0
	}
	q.chainOf[q.frames.n] = uint8(u)
	q.frames.setOffload(segs, flen, off)
	return flen
}

// Frames returns the frames of the last Receive, valid until Complete.
func (q *TxQueue) Frames() *Frames { return &q.frames }

// Complete returns every chain of the last Receive to the guest (used length
// 0: the device wrote nothing), except those Hold took, and interrupts the
// guest once if it asked to be. The frames' bytes are the guest's again afterwards.
func (q *TxQueue) Complete() error {
	n := q.pending
	q.pending = 0
	q.frames.Reset()
	if q.err != nil {
		q.held.mask = 0
		return q.err
	}
	used := q.unheld(n) // chains Hold took stay in flight
	q.returnAbandoned()
	if len(used) == 0 {
		return nil
	}
	if err := q.ring.Push(used); err != nil {
		// The frames were already handed out and counted; the guest
		// simply never gets these buffers back.
		q.fail("push", err)
		return q.err
	}
	q.notify()
	q.ctr.publish()
	return nil
}

// Reset rebinds the queue to a new ring (nil to stop it), forgetting any
// burst not completed and any chain held (HeldLost; AbandonHeld and a
// Complete first return them) (call Complete first if the old ring is still alive)
// and the error that broke it. Counters and the call fd are kept. Only the
// owning worker, or anyone while no worker polls the queue, may call it.
func (q *TxQueue) Reset(ring virtq.Ring) {
	if q.held.n > 0 || q.held.mask != 0 {
		// Held chains of the old ring nobody returned (no AbandonHeld
		// before it went): forgotten, counted in HeldLost.
		q.held.abandon.Store(false)
		q.forgetHeld(true)
	}
	q.ring = ring
	q.taker = takerOf(ring)
	q.err = nil
	q.pending = 0
	q.frames.Reset()
}

// takerOf returns ring's Taker, or nil.
func takerOf(ring virtq.Ring) virtq.Taker {
	t, _ := ring.(virtq.Taker)
	return t
}

// readOffload reads the offload fields of the virtio-net header at the
// front of a TX chain's readable segments, wherever the guest split it.
// A chain too short for them yields the zero Offload (skipHeader then
// finds it malformed).
func readOffload(segs [][]byte) Offload {
	if len(segs) > 0 && len(segs[0]) >= LegacyHeaderLen {
		return offloadFrom(segs[0])
	}
	var h [LegacyHeaderLen]byte
	n := 0
	for _, s := range segs {
		n += copy(h[n:], s)
		if n == len(h) {
			return offloadFrom(h[:])
		}
	}
	return Offload{}
}

// skipHeader trims the virtio-net header off the front of a TX chain's
// readable segments, in place (the header may have its own descriptor, sit
// at the front of the first one, or even be split over several), and returns
// the frame's segments and length. ok is false when the chain is shorter
// than the header.
func skipHeader(segs [][]byte, hdr int) (frame [][]byte, n int, ok bool) {
	for hdr > 0 {
		if len(segs) == 0 {
			return nil, 0, false
		}
		if len(segs[0]) > hdr {
			segs[0] = segs[0][hdr:]
			break
		}
		hdr -= len(segs[0])
		segs = segs[1:]
	}
	for _, s := range segs {
		n += len(s)
	}
	return segs, n, true
}
