package virtionet

import (
	"encoding/binary"

	"github.com/xvswitch/xvswitch/guestmem"
	"github.com/xvswitch/xvswitch/virtq"
)

// usedCap bounds the used entries staged before a Push. A frame never needs
// more chains than the two bursts the queue holds, so a frame's entries
// always fit after a Push, and are published by one Push (a Linux guest
// drops a merged frame whose buffers it cannot all see at once).
const usedCap = 2 * virtq.MaxBurst

// maxPops bounds the Pops of one Deliver: two per frame at most in normal
// operation (a fresh burst, then one a frame straddles into), and a guest
// posting endless unusable buffers must not keep a worker in one call.
const maxPops = 2*virtq.MaxBurst + 2

// RxQueue is the device side of a guest's receive queue (virtqueue 2k): it
// copies frames into the receive buffers the guest posted, each after a
// virtio-net header, and gives the buffers back as used.
//
// Buffers are consumed strictly in the order they were popped, which keeps
// IN_ORDER guests happy on both ring kinds. Without MRG_RXBUF every frame
// takes exactly one buffer, so the queue pops exactly as many as it has
// frames and never holds any between bursts. With MRG_RXBUF a frame takes
// as many buffers as it needs, which is known only after popping them: the
// queue pops what it estimates from the buffer sizes it saw last, and keeps
// what a burst did not use (in the first of two bursts it owns) for the
// next one. Flush hands such leftovers back before the ring is stopped.
//
// A frame's buffers are staged as used only once all of them are written,
// so a memory fault that unwinds Deliver mid-copy (see unwind) leaves no
// part of the frame among the used entries, only its buffers still held.
//
// An RxQueue is owned by one worker; see the package doc.
type RxQueue struct {
	queueBase
	mrg bool

	// bursts[cur] holds the oldest popped chains not yet used, from
	// index next on; bursts[1-cur] holds newer ones only while
	// bursts[cur] still has some (a frame straddling the two).
	bursts    [2]virtq.Burst
	cur, next int
	chainLen  int  // average buffer size of the last pop, for estimates
	drained   bool // the ring ran out of buffers during this Deliver
	// eagerLeft: the Delivers that still publish eagerly (virtq.FillJob.
	// Eager), eagerDelivers from the last one that ran out of buffers
	// before its last frame: the guest is behind.
	eagerLeft uint16
	backoff   rxBackoff
	pops      int // Pops during this Deliver, bounded by maxPops

	used         [usedCap]virtq.Used
	nused        int
	stagedFrames int // frames whose used entries are staged, not pushed
	stagedBytes  int
	delivered    int  // frames pushed during this Deliver
	streamed     int  // of them, frames a Filler wrote with streaming stores (LastBurstStreamed)
	offered      int  // frames given to this Deliver
	pushed       bool // something was pushed and the guest not yet notified

	// busy is set while Deliver runs, unplaced the frames of its Frames
	// not yet staged or counted: if a memory fault unwinds Deliver, unwind
	// finds them set and accounts for the interrupted burst.
	busy     bool
	unplaced int

	// dirty is the ring's memory while its writes are logged (live
	// migration), else nil (dirtylog.go).
	dirty *guestmem.Memory

	// filler is the ring's one-pass receive path, or nil (rxfill.go);
	// fill is its work, reused.
	filler virtq.Filler
	fill   virtq.FillJob

	// lent: buffers lent out to the zero-copy receive path (rxlend.go).
	lent rxLent

	hdr [HeaderLen]byte // the header of the frame being placed (setHeader)
	src source
	// touched keeps the loads of placeRun's first pass from being
	// optimised away.
	touched byte
}

// NewRxQueue returns an RX queue over ring (nil for a stopped queue).
func NewRxQueue(ring virtq.Ring, cfg QueueConfig) *RxQueue {
	q := &RxQueue{}
	q.init(ring, cfg)
	q.mrg = virtq.Has(cfg.Features, FeatureMrgRxbuf)
	q.dirty = loggedMemory(ring)
	q.filler = fillerOf(ring)
	q.backoff.span = max(cfg.RxBackoff, 0)
	return q
}

// Deliver copies the frames of f into the guest's receive buffers, in
// order, and returns how many it delivered; every other frame is counted
// as a drop with its reason (no buffers, buffer too small, too long). It
// interrupts the guest once if the guest asked to be. f is not modified and
// may be delivered to other queues too.
//
// A non-nil error means the guest broke the ring: the queue is broken for
// good, the frames not delivered are counted as ring_broken, and the device
// owning it should be marked broken.
func (q *RxQueue) Deliver(f *Frames) (int, error) {
	q.ctr.begin()
	q.streamed = 0
	if q.err != nil {
		q.ctr.drop(DropRingBroken, f.n)
		q.ctr.publish()
		return 0, q.err
	}
	if q.ring == nil {
		q.ctr.drop(DropQueueStopped, f.n)
		q.ctr.publish()
		return 0, nil
	}
	if q.backoff.holding() {
		q.ctr.drop(DropNoRxBuffers, f.n) // rxbackoff.go
		q.ctr.publish()
		return 0, nil
	}
	q.returnAbandoned()
	q.drained = false
	q.pops = 0
	q.delivered = 0
	q.offered = f.n
	q.busy = true
	defer q.unwind()
	fill := true // until the Filler places nothing (rxfill.go)
	for i := 0; i < f.n; i++ {
		// Every frame before i is staged, delivered or counted, so a
		// fault from here on (in a pop as much as in a copy) leaves
		// unwind the right count.
		q.unplaced = f.n - i
		if fill && q.filling() {
			if n := q.fillRun(f, i); n > 0 {
				i += n - 1
				continue
			}
			fill = false
		}
		if n := q.placeRun(f, i); n > 0 {
			i += n - 1
			continue
		}
		if q.err != nil {
			q.abort(f.n - i)
			return q.delivered, q.err
		}
		q.unplaced = f.n - i
		if f.lens[i] > q.frameLimit(f, i) {
			q.ctr.drop(DropTooLong, 1)
			continue
		}
		var ok bool
		var why DropReason
		if q.mrg {
			ok, why = q.placeMerged(f, i)
		} else {
			ok, why = q.placeOne(f, i)
		}
		if q.err != nil {
			q.abort(f.n - i)
			return q.delivered, q.err
		}
		if !ok {
			q.ctr.drop(why, 1)
		}
	}
	return q.finish()
}

// finish ends a Deliver (or a completion of lent buffers, rxlend.go)
// once every frame is staged or counted: it publishes the staged used
// entries in one Push, interrupts the guest once if it asked to be, and
// returns the frames delivered during the call.
func (q *RxQueue) finish() (int, error) {
	q.unplaced = 0
	if !q.pushUsed() {
		q.abort(0)
		return q.delivered, q.err
	}
	if q.pushed {
		q.notify()
		q.pushed = false
	}
	q.busy = false
	if q.drained && q.delivered < q.offered {
		q.backoff.ranDry()
		q.eagerLeft = eagerDelivers
	} else if q.eagerLeft > 0 {
		q.eagerLeft--
	}
	q.ctr.publish()
	return q.delivered, nil
}

// unwind runs as Deliver returns. The switch's workers run with
// debug.SetPanicOnFault, so a memory fault (a front-end truncated the
// memfd behind this guest's buffers, or behind the frame being copied)
// unwinds Deliver from the middle of a copy, and only a deferred call sees
// it. The frame being copied was not staged (placeOne and placeMerged
// stage a frame only once it is written whole), so nothing of it can reach
// the used ring; it and the frames after it count as memory_fault drops.
// The frames staged before it are whole in the guest's buffers and count
// as delivered now: the next Push publishes them (the next Deliver's, or
// Flush's when the ring is stopped), inside a burst the switch voided
// with the fault, so none is counted in a later burst. The queue is left
// usable: the fault may have been another guest's, and if it was this
// guest's, vhost breaks the device. unwind touches no guest memory.
func (q *RxQueue) unwind() {
	if !q.busy {
		return
	}
	q.busy = false
	if j := &q.fill; j.Published > 0 {
		// An eager Fill published some of its frames before the
		// fault: the guest has those (fillRun zeroes Published once a
		// Fill returns, so only an interrupted one leaves it set).
		bytes := 0
		for _, src := range j.Src[:j.Published] {
			bytes += len(src)
		}
		q.ctr.pass(j.Published, bytes)
		q.unplaced -= j.Published
		q.pushed = true // the next finish interrupts for them
		j.Published = 0
	}
	q.ctr.drop(DropMemoryFault, q.unplaced)
	q.unplaced = 0
	q.ctr.pass(q.stagedFrames, q.stagedBytes)
	q.stagedFrames, q.stagedBytes = 0, 0
	q.ctr.publish()
}

// placeOne puts frame i into the next buffer, as one buffer must hold it
// when MRG_RXBUF is off. A buffer too small for it is returned unused (the
// guest sees a zero-length receive, which Linux and DPDK count as an error
// and recycle), so that buffers are still used in order.
func (q *RxQueue) placeOne(f *Frames, i int) (bool, DropReason) {
	if q.avail() == 0 && !q.refill(f, i) {
		return false, DropNoRxBuffers
	}
	if q.nused == usedCap && !q.pushUsed() {
		return false, DropRingBroken
	}
	b, ci := q.chainAt(0)
	c := &b.Chains[ci]
	need := q.hdrLen + f.lens[i]
	if int64(c.WriteLen) < int64(need) {
		q.stage(c, 0)
		return false, DropGuestBufferTooSmall
	}
	q.setHeader(f, i, 1)
	q.src.start(q.hdr[:q.hdrLen], f.segs[i])
	w := q.src.writeTo(b.Writable(ci), need)
	if q.dirty != nil {
		q.dirty.LogWritten(b.Writable(ci), w)
	}
	if w != need {
		// The ring's WriteLen overstated its segments: a ring bug, not
		// the guest's; do not hand the guest a truncated frame.
		q.stage(c, 0)
		return false, DropGuestBufferTooSmall
	}
	q.stage(c, uint32(need))
	q.stagedFrames++
	q.stagedBytes += f.lens[i]
	return true, 0
}

// placeMerged spreads frame i over as many buffers as it needs (MRG_RXBUF),
// with num_buffers in the header of the first. It first makes sure enough
// buffers are there, so a frame is never left half-written.
func (q *RxQueue) placeMerged(f *Frames, i int) (bool, DropReason) {
	need := q.hdrLen + f.lens[i]
	k, got := 0, 0
	for got < need {
		if k == q.avail() && !q.refill(f, i) {
			break
		}
		b, ci := q.chainAt(k)
		c := &b.Chains[ci]
		if k == 0 && int64(c.WriteLen) < int64(q.hdrLen) {
			// The spec requires every merged buffer to hold a header;
			// one that cannot goes back unused rather than split the
			// header of the frame starting in it.
			if q.nused == usedCap && !q.pushUsed() {
				return false, DropRingBroken
			}
			q.stage(c, 0)
			continue
		}
		got += int(c.WriteLen)
		k++
	}
	if got < need {
		if q.drained || q.err != nil {
			return false, DropNoRxBuffers
		}
		return false, DropGuestBufferTooSmall
	}
	if q.nused+k > usedCap && !q.pushUsed() {
		return false, DropRingBroken
	}
	q.setHeader(f, i, k)
	q.src.start(q.hdr[:q.hdrLen], f.segs[i])
	// Write every buffer before staging any: a fault mid-copy must not
	// leave the frame's first buffers staged behind a num_buffers that
	// counts the rest (see unwind).
	for j := 0; j < k; j++ {
		b, ci := q.chainAt(j)
		c := &b.Chains[ci]
		w := q.src.writeTo(b.Writable(ci), int(c.WriteLen))
		if q.dirty != nil {
			q.dirty.LogWritten(b.Writable(ci), w)
		}
		q.used[q.nused+j] = virtq.Used{ID: c.ID, Descs: c.Descs, Len: uint32(w)}
	}
	q.nused += k
	q.letGo(k)
	q.stagedFrames++
	q.stagedBytes += f.lens[i]
	return true, 0
}

// setHeader builds the header of frame i of f, taking n buffers, in q.hdr:
// its offload metadata and num_buffers.
func (q *RxQueue) setHeader(f *Frames, i, n int) {
	lo, hi := f.rxHeader(i, n)
	binary.LittleEndian.PutUint64(q.hdr[:], lo)
	binary.LittleEndian.PutUint32(q.hdr[8:], hi)
}

// frameLimit is the longest frame i of f may be: the MTU's frame, or a
// GSO frame's limit for a guest that takes them whole (the switch gives a
// queue only GSO frames its guest accepts: Offloads.Accepts).
func (q *RxQueue) frameLimit(f *Frames, i int) int {
	if f.off[i].GSO() {
		return MaxGSOFrameLen
	}
	return q.maxFrame
}

// left is how many chains bursts[cur] still holds; avail counts both.
func (q *RxQueue) left() int  { return q.bursts[q.cur].N - q.next }
func (q *RxQueue) avail() int { return q.left() + q.bursts[1-q.cur].N }

// chainAt returns the k-th oldest chain not yet used.
func (q *RxQueue) chainAt(k int) (*virtq.Burst, int) {
	if l := q.left(); k >= l {
		return &q.bursts[1-q.cur], k - l
	}
	return &q.bursts[q.cur], q.next + k
}

// stage records the oldest held chain as used with n bytes written and lets
// go of it. The caller made room in q.used.
func (q *RxQueue) stage(c *virtq.Chain, n uint32) {
	q.used[q.nused] = virtq.Used{ID: c.ID, Descs: c.Descs, Len: n}
	q.nused++
	q.letGo(1)
}

// letGo stops holding the n oldest held chains (their used entries are
// staged).
func (q *RxQueue) letGo(n int) {
	for n > 0 {
		b := &q.bursts[q.cur]
		step := min(n, b.N-q.next)
		if step <= 0 {
			return // callers let go only of chains held
		}
		q.next += step
		n -= step
		if q.next == b.N {
			b.Reset()
			q.cur ^= 1
			q.next = 0
		}
	}
}

// refill pops more buffers behind the ones held, for frame i of f, and
// reports whether any came. It pops into whichever burst is empty: when
// none is held, an estimate of what the rest of f needs (exactly one per
// frame without MRG_RXBUF); when a frame straddles into a second burst, a
// full burst, since the estimate already fell short.
func (q *RxQueue) refill(f *Frames, i int) bool {
	if q.drained || q.err != nil {
		return false
	}
	if q.pops == maxPops {
		q.drained = true
		return false
	}
	q.pops++
	var b *virtq.Burst
	want := virtq.MaxBurst
	switch {
	case q.left() == 0:
		b = &q.bursts[q.cur]
		want = q.estimate(f, i)
	case q.bursts[1-q.cur].N == 0:
		b = &q.bursts[1-q.cur]
	default:
		return false
	}
	n, err := q.ring.Pop(b, want)
	if err != nil {
		q.fail("pop", err)
		return false
	}
	if n < want {
		q.drained = true
	}
	if n == 0 {
		return false
	}
	sum := 0
	for j := 0; j < n; j++ {
		sum += int(b.Chains[j].WriteLen)
	}
	q.chainLen = sum / n
	return true
}

// estimate returns how many buffers frames i.. of f need, between 1 and
// virtq.MaxBurst, assuming buffers of the size seen last.
func (q *RxQueue) estimate(f *Frames, i int) int {
	// The longest frame decides for all when it is within the limits
	// and fits one buffer: one buffer a frame. Its loop is a load and a
	// max a frame; estimateEach's, with its branches, cost 3-4 ns a
	// frame in the switch -> VM profile.
	l := 0
	for _, n := range f.lens[i:f.n] {
		l = max(l, n)
	}
	if l <= min(q.maxFrame, MaxGSOFrameLen) && (!q.mrg || q.chainLen <= 0 || q.hdrLen+l <= q.chainLen) {
		return min(max(f.n-i, 1), virtq.MaxBurst)
	}
	return q.estimateEach(f, i)
}

// estimateEach is estimate looking at each frame.
func (q *RxQueue) estimateEach(f *Frames, i int) int {
	n := 0
	for j := i; j < f.n && n < virtq.MaxBurst; j++ {
		l := f.lens[j]
		switch {
		case l > q.frameLimit(f, j):
		case !q.mrg || q.chainLen <= 0 || q.hdrLen+l <= q.chainLen:
			// One buffer. Tested before dividing: a 64-bit division
			// per frame was half of estimate's time in the switch ->
			// VM profile, and nearly every frame fits one buffer.
			n++
		default:
			n += (q.hdrLen + l + q.chainLen - 1) / q.chainLen
		}
	}
	return min(max(n, 1), virtq.MaxBurst)
}

// pushUsed publishes the staged used entries in one Push and counts the
// frames they complete as delivered. False means the ring broke.
func (q *RxQueue) pushUsed() bool {
	if q.nused == 0 {
		return true
	}
	err := q.ring.Push(q.used[:q.nused])
	q.nused = 0
	if err != nil {
		q.fail("push", err)
		return false
	}
	q.pushed = true
	q.ctr.pass(q.stagedFrames, q.stagedBytes)
	q.delivered += q.stagedFrames
	q.stagedFrames, q.stagedBytes = 0, 0
	return true
}

// abort accounts for a ring failure in the middle of Deliver: the frames
// staged but not pushed and the rest frames not yet placed are lost.
func (q *RxQueue) abort(rest int) {
	q.ctr.drop(DropRingBroken, q.stagedFrames+rest)
	q.busy, q.unplaced = false, 0
	q.stagedFrames, q.stagedBytes = 0, 0
	q.nused = 0
	q.forget()
	q.ctr.publish()
}

// forget drops the held buffers without returning them.
func (q *RxQueue) forget() {
	q.bursts[0].Reset()
	q.bursts[1].Reset()
	q.cur, q.next = 0, 0
}

// Held is how many receive buffers the queue holds over from earlier
// bursts (popped, not yet used), lent ones included (rxlend.go). Without
// MRG_RXBUF and lending always 0, unless a memory fault interrupted a
// Deliver (the frame's buffer stays held).
func (q *RxQueue) Held() int { return q.avail() + q.lent.n }

// Flush gives the held buffers back to the guest unused (length 0) and
// interrupts it if it asked. Call it before the ring's state is read for
// GET_VRING_BASE and before the ring or the memory table is replaced: held
// buffers point into the current mapping and would otherwise be lost to the
// guest.
func (q *RxQueue) Flush() error {
	if q.err != nil {
		return q.err
	}
	if q.ring == nil {
		return nil
	}
	q.returnAbandoned() // lent buffers stay lent unless abandoned
	for q.avail() > 0 {
		if q.nused == usedCap && !q.pushUsed() {
			q.abort(0)
			return q.err
		}
		b, ci := q.chainAt(0)
		q.stage(&b.Chains[ci], 0)
	}
	if !q.pushUsed() {
		q.abort(0)
		return q.err
	}
	if q.pushed {
		q.notify()
		q.pushed = false
	}
	q.ctr.publish()
	return nil
}

// Reset rebinds the queue to a new ring (nil to stop it), forgetting held
// buffers (call Flush first if the old ring is still alive) and the error
// that broke it. Counters and the call fd are kept. Only the owning worker,
// or anyone while no worker polls the queue, may call it.
func (q *RxQueue) Reset(ring virtq.Ring) {
	if ring != q.ring {
		// Lent IDs mean nothing to another ring (a republish with new
		// fds keeps the ring, and the lent buffers with it).
		q.forgetLent()
	}
	q.ring = ring
	q.dirty = loggedMemory(ring)
	q.filler = fillerOf(ring)
	q.err = nil
	q.nused = 0
	q.stagedFrames, q.stagedBytes = 0, 0
	q.pushed, q.busy, q.unplaced = false, false, 0
	q.forget()
}
