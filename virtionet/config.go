package virtionet

import (
	"fmt"
	"time"

	"github.com/xvswitch/xvswitch/virtq"
)

// QueueConfig is what a queue needs besides its ring.
type QueueConfig struct {
	// Index is the virtqueue index (2k for RX, 2k+1 for TX), for errors.
	Index int
	// Features is the negotiated virtio feature word: VERSION_1 and
	// MRG_RXBUF decide the header size and how RX frames are spread.
	Features uint64
	// MaxFrame is the longest Ethernet frame (without the virtio-net
	// header) the queue passes, MaxFrameLen(mtu); longer ones are dropped
	// as DropTooLong. Zero means MaxFrameLen(1500).
	MaxFrame int
	// Call is the line of a Notifier that interrupts the guest for this
	// queue (vhost-user SET_VRING_CALL); nil for none.
	Call *Line
	// RxBackoff (receive queues): after a Deliver that ran out of the
	// guest's buffers, Deliver counts frames as no_rx_buffers without
	// reading the ring for this long, so that a switch that brings frames
	// faster than the guest takes them does not slow the guest's refill
	// with its looks (rxbackoff.go). Zero or negative: off.
	RxBackoff time.Duration
}

func (c *QueueConfig) maxFrame() int {
	if c.MaxFrame <= 0 {
		return MaxFrameLen(1500)
	}
	return c.MaxFrame
}

// queueBase is what both queue kinds share: the ring, the counters, the
// line that interrupts the guest and the error that broke the queue.
type queueBase struct {
	ring     virtq.Ring
	index    int
	hdrLen   int
	maxFrame int
	offl     Offloads // what the guest negotiated
	err      error    // non-nil once the ring failed; returned from then on
	ctr      counters
	call     *Line
}

func (q *queueBase) init(ring virtq.Ring, cfg QueueConfig) {
	q.ring = ring
	q.index = cfg.Index
	q.hdrLen = HeaderLenFor(cfg.Features)
	q.maxFrame = cfg.maxFrame()
	q.offl = OffloadsOf(cfg.Features)
	q.call = cfg.Call
}

// fail marks the queue broken with the ring's error. It allocates once, when
// the queue breaks, never on later calls.
func (q *queueBase) fail(op string, err error) {
	q.err = fmt.Errorf("virtionet: queue %d: %s: %w", q.index, op, err)
}

// notify interrupts the guest once if it asked for it; called once per
// burst after the last Push. The interrupt is the Notifier's to write:
// this only raises the line, so a front-end's eventfd never blocks the
// worker.
func (q *queueBase) notify() {
	if q.ring.NeedNotify() && q.call.Signal() {
		q.ctr.notified()
	}
}

// Offloads returns the offloads the queue's guest negotiated.
func (q *queueBase) Offloads() Offloads { return q.offl }

// Snapshot returns the counters as of the end of the last burst. Safe to
// call from any goroutine.
func (q *queueBase) Snapshot() Stats { return q.ctr.snapshot() }

// LastBurst returns what the last burst (a TX queue's Receive and
// Complete, an RX queue's Deliver) added to the counters: the switch adds
// these to its own per-port totals without keeping deltas. Only the owning
// worker may call it.
func (q *queueBase) LastBurst() Stats { return q.ctr.burst }

// LastBurstPassed is LastBurst's Packets and Bytes, without the copy of
// its drops.
func (q *queueBase) LastBurstPassed() (packets, bytes uint64) {
	return q.ctr.burst.Packets, q.ctr.burst.Bytes
}

// LastBurstDrops returns the last burst's drops by reason (LastBurst's
// Drops, in place: read-only, valid until the next burst), or nil when it
// dropped nothing, so that the owning worker reads them only after a
// burst that did.
func (q *queueBase) LastBurstDrops() *[NumDropReasons]uint64 {
	if !q.ctr.burstDropped {
		return nil
	}
	return &q.ctr.burst.Drops
}

// Err returns the error that broke the queue, or nil.
func (q *queueBase) Err() error { return q.err }

// Ring returns the queue's ring (nil when stopped), for the worker's kick
// handling (EnableKicks, DisableKicks) and for State.
func (q *queueBase) Ring() virtq.Ring { return q.ring }

// RingSize is the queue's ring's number of descriptors (0: no ring).
func (q *queueBase) RingSize() int {
	if q.ring == nil {
		return 0
	}
	return q.ring.Size()
}
