package virtionet

import (
	"encoding/binary"
	"errors"
	"sync/atomic"

	"github.com/xvswitch/xvswitch/virtq"
)

// Lending receive buffers out (the zero-copy receive path,
// docs/zerocopy.md): the switch takes posted buffers without filling
// them, offers them to the kernel as AF_XDP fill buffers, and completes
// them by ID when the kernel has written a frame into one, in whatever
// order frames come back (owners never offer IN_ORDER). Deliver's own
// buffers and lent ones share the ring: lending takes only from the front
// of what Deliver holds or pops afresh, and stops at the first buffer
// that does not qualify, which stays Deliver's, so every popped buffer is
// either Deliver's (used in pop order) or lent (used by ID).
//
// A lent buffer belongs to the kernel until the socket it was offered on
// is closed: posted fill buffers cannot be taken back. So nothing here
// gives one back on its own (not Flush, not Reset onto the same ring):
// the lender closes its sockets and then calls AbandonLent, and the next
// call on the worker's side (Deliver, Flush, LendBuffers,
// CompleteLent) returns every lent buffer as used with length 0, which a
// guest recycles as an empty receive. vhost's Config.OnRxStop lets the
// lender do that before a ring is stopped or its memory replaced.

// LentBuffer is a posted receive buffer lent out: one writable
// descriptor, Buf its bytes in guest memory (valid as long as the memory
// table).
type LentBuffer struct {
	ID  uint16
	Buf []byte
}

// LentDone completes a lent buffer: Len frame bytes were written at
// Buf[HeaderLen:]. Len 0 gives the buffer back unused (no frame: nothing
// counted), for one the lender could not use after all.
type LentDone struct {
	ID  uint16
	Len int
}

// LendStop says why LendBuffers took fewer than asked.
type LendStop uint8

const (
	// LendOK: the guest has no more buffers posted right now.
	LendOK LendStop = iota
	// LendStopped: the queue has no ring, or it is broken.
	LendStopped
	// LendLogging: the front-end logs dirty pages (live migration); the
	// kernel's writes would bypass the log, so nothing is lent.
	LendLogging
	// LendUnfit: the next buffer does not qualify (smaller than asked,
	// chained, or the legacy 10-byte header); it stays Deliver's.
	LendUnfit
)

// errLentTwice: the ring handed out a chain ID that is lent already.
var errLentTwice = errors.New("virtionet: the ring made a lent buffer's id available again")

// rxLent is the RxQueue's table of lent buffers, by chain ID.
type rxLent struct {
	byID    []lentEntry // grown to the highest ID seen (bounded by 65536)
	n       int
	abandon atomic.Bool // set by AbandonLent, from any goroutine
	// shown is n as other goroutines may read it (Lent): stored once per
	// call that changes n, not per buffer.
	shown atomic.Int32
}

func (t *rxLent) publish() { t.shown.Store(int32(t.n)) }

type lentEntry struct {
	buf   []byte
	descs uint16
	lent  bool
}

// LendBuffers takes up to len(out) posted buffers of one writable
// descriptor of at least minLen bytes, without filling them, and returns
// how many it took and why it stopped. It leaves keep (at most
// virtq.MaxBurst) of the popped buffers to Deliver: frames the switch
// copies to the guest (floods, frames that missed the lent buffers) find
// buffers even when the guest posts fewer than its ring holds, which a
// limit on lending by the ring's size cannot know (testpmd posts 512 of a
// 4096-entry ring by default).
func (q *RxQueue) LendBuffers(out []LentBuffer, minLen, keep int) (int, LendStop) {
	defer q.lent.publish()
	q.returnAbandoned()
	switch {
	case q.ring == nil || q.err != nil:
		return 0, LendStopped
	case q.dirty != nil:
		return 0, LendLogging
	case q.hdrLen != HeaderLen:
		return 0, LendUnfit
	}
	keep = min(max(keep, 0), virtq.MaxBurst)
	k := 0
	for k < len(out) {
		if q.avail() <= keep {
			// Pop into whichever burst is empty (the newer one when
			// Deliver's kept buffers are in the older): both held and
			// still no more than keep means the guest posted no more.
			b := &q.bursts[q.cur]
			if q.left() != 0 {
				b = &q.bursts[1-q.cur]
			}
			if b.N != 0 {
				return k, LendOK
			}
			n, err := q.ring.Pop(b, virtq.MaxBurst)
			if err != nil {
				q.fail("pop", err)
				return k, LendStopped
			}
			if n == 0 {
				return k, LendOK
			}
			continue
		}
		b, ci := q.chainAt(0)
		buf := b.WritableOne(ci)
		if len(buf) < minLen {
			return k, LendUnfit
		}
		c := &b.Chains[ci]
		if !q.lent.put(c.ID, c.Descs, buf) {
			q.fail("pop", errLentTwice)
			return k, LendStopped
		}
		q.letGo(1)
		out[k] = LentBuffer{ID: c.ID, Buf: buf}
		k++
	}
	return k, LendOK
}

func (t *rxLent) put(id, descs uint16, buf []byte) bool {
	if int(id) >= len(t.byID) {
		// Only when a higher ID shows up: at most up to the ring size.
		t.byID = append(t.byID, make([]lentEntry, int(id)+1-len(t.byID))...)
	}
	e := &t.byID[id]
	if e.lent {
		return false
	}
	*e = lentEntry{buf: buf, descs: descs, lent: true}
	t.n++
	return true
}

// CompleteLent gives lent buffers back to the guest as used, each with a
// virtio-net header (num_buffers 1, no offloads) written in front of the
// frame the kernel wrote, and interrupts the guest once if it asked. It
// returns how many frames it delivered. A done whose ID is not lent (the
// buffers were abandoned since) or whose length does not fit its buffer is
// a drop (queue_stopped, guest_buffer_too_small), with a too-long one's
// buffer returned empty. A non-nil error: the ring broke.
func (q *RxQueue) CompleteLent(done []LentDone) (int, error) {
	defer q.lent.publish()
	q.ctr.begin()
	q.returnAbandoned()
	if q.err != nil {
		q.ctr.drop(DropRingBroken, len(done))
		q.ctr.publish()
		return 0, q.err
	}
	if q.ring == nil {
		q.ctr.drop(DropQueueStopped, len(done))
		q.ctr.publish()
		return 0, nil
	}
	q.delivered = 0
	q.busy = true
	defer q.unwind()
	for i, d := range done {
		q.unplaced = len(done) - i
		if q.nused == usedCap && !q.pushUsed() {
			q.abort(len(done) - i)
			return q.delivered, q.err
		}
		if int(d.ID) >= len(q.lent.byID) || !q.lent.byID[d.ID].lent {
			q.ctr.drop(DropQueueStopped, 1)
			continue
		}
		e := &q.lent.byID[d.ID]
		if d.Len == 0 {
			q.stageLent(d.ID, 0)
			continue
		}
		if d.Len < 0 || d.Len > len(e.buf)-HeaderLen {
			q.stageLent(d.ID, 0)
			q.ctr.drop(DropGuestBufferTooSmall, 1)
			continue
		}
		binary.LittleEndian.PutUint64(e.buf, 0)
		binary.LittleEndian.PutUint32(e.buf[8:HeaderLen], 1<<((numBuffersOff-8)*8))
		if q.dirty != nil {
			// Lent before the front-end started logging: the kernel's
			// write bypassed the log, so the buffer is logged now, before
			// the guest can see it used.
			q.dirty.LogWrite(e.buf[:HeaderLen+d.Len])
		}
		q.stageLent(d.ID, uint32(HeaderLen+d.Len))
		q.stagedFrames++
		q.stagedBytes += d.Len
	}
	return q.finish()
}

// stageLent stages lent buffer id as used with n bytes and forgets it.
// The caller made room in q.used.
func (q *RxQueue) stageLent(id uint16, n uint32) {
	e := &q.lent.byID[id]
	q.used[q.nused] = virtq.Used{ID: id, Descs: e.descs, Len: n}
	q.nused++
	*e = lentEntry{}
	q.lent.n--
}

// AbandonLent says the lent buffers can no longer be written by anyone
// (the sockets they were offered on are closed): the queue's next call
// returns them all as used with length 0. Safe from any goroutine.
func (q *RxQueue) AbandonLent() { q.lent.abandon.Store(true) }

// Lent is how many buffers are lent out, as of the queue's last lend or
// completion. Safe from any goroutine.
func (q *RxQueue) Lent() int { return int(q.lent.shown.Load()) }

// returnAbandoned returns the lent buffers after AbandonLent. On a
// stopped or broken queue they are only forgotten: no ring to return them
// on (vhost stops a ring only after its Config.OnRxStop, in time for
// Flush to return them).
func (q *RxQueue) returnAbandoned() {
	if !q.lent.abandon.Load() || !q.lent.abandon.CompareAndSwap(true, false) {
		return
	}
	if q.lent.n == 0 {
		return
	}
	if q.ring == nil || q.err != nil {
		q.forgetLent()
		return
	}
	for id := range q.lent.byID {
		if !q.lent.byID[id].lent {
			continue
		}
		if q.nused == usedCap && !q.pushUsed() {
			q.forgetLent()
			return
		}
		q.stageLent(uint16(id), 0)
	}
	q.lent.publish()
	if q.pushUsed() && q.pushed {
		q.notify()
		q.pushed = false
	}
}

// forgetLent drops the table without returning anything.
func (q *RxQueue) forgetLent() {
	clear(q.lent.byID)
	q.lent.n = 0
	q.lent.publish()
}
