package vhost

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/xvswitch/xvswitch/virtionet"
	"github.com/xvswitch/xvswitch/virtq"
)

// ringFactory builds the device side of a ring; packed says which kind.
type ringFactory func(packed bool, cfg virtq.Config) (virtq.Ring, error)

// queueCtl is the control path's view of one virtqueue: what the front-end
// set up, and the ring while it runs. Guarded by Device.mu.
type queueCtl struct {
	num     uint32
	addr    vringAddr
	hasAddr bool
	base    uint32
	// baseOwn: base is what a ring of ours saved when it stopped, not
	// the front-end's SET_VRING_BASE (resume.go checks only those).
	baseOwn bool
	kickSet bool // SET_VRING_KICK seen: the ring is started
	kickFD  int  // -1: none, or poll mode
	enabled bool
	ring    virtq.Ring
	act     *Active // what Begin returns, nil while stopped

	// The virtio-net queue over the ring and what it was made for; a
	// new one is made when the session, features or frame limit change.
	netSID      uint64
	netFeatures uint64
	netMaxFrame int
}

func (c *queueCtl) reset() {
	*c = queueCtl{kickFD: -1}
}

// startable reports whether the ring has everything it needs to run.
func (c *queueCtl) startable(s *session) bool {
	return s.mem != nil && c.num != 0 && c.hasAddr && c.kickSet && c.enabled
}

// tryStart builds and publishes the ring of q if it can run and does not.
// An error means the front-end's ring setup is unusable.
func (d *Device) tryStart(s *session, q *Queue) error {
	c := &q.ctl
	if c.act != nil || !c.startable(s) {
		return nil
	}
	resumed, dropped := false, 0
	if c.ring == nil {
		cfg := virtq.Config{
			Mem: s.ringMem(), Size: uint16(c.num),
			Desc: c.addr.desc, Driver: c.addr.avail, Device: c.addr.used,
			Features: ringFeatures(s.packed(), q.index, s.features), Base: ringBase(s.packed(), c.base),
			// The guest's transmit queues (odd indexes) are only read.
			ReadOnly: q.index%2 == 1,
		}
		cfg.Base, resumed, dropped = d.startBase(s, q, cfg)
		r, err := d.cfg.newRing(s.packed(), cfg)
		if err != nil {
			return fmt.Errorf("%w: queue %d: %w", ErrBadMessage, q.index, err)
		}
		c.ring = r
	}
	d.ensureNetQueue(s, q)
	if t := q.tx.Load(); t != nil {
		// Counted by the queue's next burst (virtionet/resumedrops.go).
		t.AddResumeDrops(dropped)
	}
	c.act = d.newActive(s, q)
	q.publish(c.act)
	if resumed {
		d.signalResumed(s, q)
	}
	return nil
}

// ensureNetQueue makes sure q has a virtio-net queue for the session's
// features and frame limit. A new one starts with fresh counters; the old
// one stays reachable from the old snapshot until the rebind flushes it.
func (d *Device) ensureNetQueue(s *session, q *Queue) {
	c := &q.ctl
	mf := virtionet.MaxFrameLen(d.mtu(s))
	// LOG_ALL changes nothing of virtio-net (the ring brings the log):
	// logging turned on keeps the queue and its counters.
	f := s.features &^ (1 << FeatureLogAll)
	if c.netSID == s.id && c.netFeatures == f && c.netMaxFrame == mf {
		return
	}
	c.netSID, c.netFeatures, c.netMaxFrame = s.id, f, mf
	nc := virtionet.QueueConfig{Index: q.index, Features: f, MaxFrame: mf, Call: s.callLine(q.index)}
	if q.index%2 == 0 {
		nc.RxBackoff = d.cfg.RxBackoff
		q.rx.Store(virtionet.NewRxQueue(nil, nc))
	} else {
		q.tx.Store(virtionet.NewTxQueue(nil, nc))
	}
}

func (d *Device) newActive(s *session, q *Queue) *Active {
	c := &q.ctl
	return &Active{Rx: q.rx.Load(), Tx: q.tx.Load(), Ring: c.ring, Mem: s.ringMem(),
		Features: s.features, Index: q.index,
		q: q, session: s.id, kickFD: c.kickFD}
}

// mtu is the MTU the session's frames are held to: NET_SET_MTU's, else
// the configured one, else 1500.
func (d *Device) mtu(s *session) int {
	switch {
	case s.mtu != 0:
		return s.mtu
	case d.cfg.MTU != 0:
		return d.cfg.MTU
	}
	return 1500
}

// ringBase interprets SET_VRING_BASE. For a packed ring QEMU sends both
// halves (avail index and wrap in bits 0-15, used in bits 16-31), but DPDK's
// virtio-user sends only the avail half (1<<15 for a fresh ring), and
// DPDK's own back-end ignores the used half and starts used where avail
// is. We do the same when the used half is zero. That is always right: a
// ring is stopped with nothing in flight, so used equals avail, and a used
// half of zero with a different avail half cannot be a real state.
func ringBase(packed bool, base uint32) uint32 {
	if packed && base>>16 == 0 {
		return base | base<<16
	}
	return base
}

// ringFeatures is the feature word a ring is built with. A packed ring
// with IN_ORDER batches used descriptors (one for a run of buffers, as the
// spec allows); DPDK's virtio driver understands such batches only on its
// transmit queues (DPDK's own back-end batches only there) and loses its
// place on a receive queue, merged buffers first. On the guest's receive
// queues the ring therefore writes one used descriptor per buffer, which
// an in-order driver reads just as well: the buffers are still used in
// order (virtionet's RX queue consumes them in pop order).
func ringFeatures(packed bool, index int, f uint64) uint64 {
	if packed && index%2 == 0 {
		return f &^ (1 << virtq.FeatureInOrder)
	}
	return f
}

// unpublish stops handing q's ring to the data path and returns the
// generation to wait for, or 0 if it was not published.
func (d *Device) unpublish(q *Queue) uint64 {
	if q.ctl.act == nil {
		return 0
	}
	if hook := d.cfg.OnRxStop; hook != nil && q.index%2 == 0 {
		hook(q.index)
	}
	if hook := d.cfg.OnTxStop; hook != nil && q.index%2 == 1 {
		hook(q.index)
	}
	q.ctl.act = nil
	return q.publish(nil)
}

// settle waits for q's poller to leave snapshots older than gen. On a
// timeout the caller must not unmap or close what the old one used.
func (d *Device) settle(q *Queue, gen uint64) bool {
	if gen == 0 || q.waitRelease(gen) {
		return true
	}
	d.log.Error("vhost poller did not release a queue; leaking its old mappings and fds", "queue", q.index)
	return false
}

// stopRing takes q's ring away from the data path and keeps its state as
// the base to restart from. It reports false if the poller did not let go
// (then nothing the old ring used may be freed).
func (d *Device) stopRing(q *Queue) bool {
	ok := d.settle(q, d.unpublish(q))
	d.dropRing(q)
	return ok
}

// dropRing forgets the (unpublished, released) ring, saving its state.
func (d *Device) dropRing(q *Queue) {
	c := &q.ctl
	if c.ring == nil {
		return
	}
	if n := c.ring.InFlight(); n > 0 {
		d.log.Warn("vhost ring stopped with chains in flight; the guest loses them", "queue", q.index, "inflight", n)
	}
	c.base, c.baseOwn = c.ring.State(), true
	c.ring = nil
}

// republish hands the running ring of q to the data path again with the
// current fds (kick or call replaced) and reports whether the poller
// released the previous snapshot.
func (d *Device) republish(s *session, q *Queue) bool {
	if q.ctl.act == nil {
		return true
	}
	q.ctl.act = d.newActive(s, q)
	return d.settle(q, q.publish(q.ctl.act))
}

// pauseAll unpublishes every running ring, waits for the pollers, and
// returns the queues that were running, with their rings dropped (state
// saved). ok is false if some poller did not let go.
func (d *Device) pauseAll() (was []*Queue, ok bool) {
	gens := make([]uint64, len(d.queues))
	for i, q := range d.queues {
		gens[i] = d.unpublish(q)
	}
	ok = true
	for i, q := range d.queues {
		if gens[i] != 0 {
			was = append(was, q)
			if !d.settle(q, gens[i]) {
				ok = false
			}
		}
		d.dropRing(q)
	}
	return was, ok
}

// restartAll rebuilds and republishes rings after pauseAll.
func (d *Device) restartAll(s *session) error {
	var errs []error
	for _, q := range d.queues {
		if err := d.tryStart(s, q); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// resetRings stops every ring, closes every queue's kick eventfd and
// forgets the ring setup (RESET_OWNER, session end). It reports false if
// some poller did not let go; then the kick fds are leaked, not closed
// under it. The call and error eventfds are the session's Notifier's:
// closed with it at the session's end, after what it owes them (the
// error signal of a broken session) is written.
func (d *Device) resetRings() bool {
	_, ok := d.pauseAll()
	for _, q := range d.queues {
		c := &q.ctl
		if ok {
			closeFD(c.kickFD)
		}
		c.reset()
		if q.curKick >= 0 {
			q.publish(nil) // deregisters the kick fd from epfd
		}
	}
	return ok
}

// signalErr signals every queue's error eventfd (SET_VRING_ERR), so the
// front-end learns why the connection is about to close. The session's
// Notifier writes them: the control path holds d.mu here and must not
// block on an eventfd the front-end chose.
func (d *Device) signalErr(s *session) {
	for _, q := range d.queues {
		s.errLine(q.index).Signal()
	}
}

// updateReady emits Ready or Stopped when queue pair 0's state changes
// (and logs other queue pairs starting and stopping, which have no event).
func (d *Device) updateReady(s *session) {
	d.logQueuePairs(s)
	ready := d.sess == s && d.queues[0].ctl.act != nil && d.queues[1].ctl.act != nil
	if ready == s.ready {
		return
	}
	s.ready = ready
	if ready {
		s.event(Event{Kind: EventReady})
	} else {
		s.event(Event{Kind: EventStopped})
	}
}

func closeFD(fd int) {
	if fd >= 0 {
		_ = unix.Close(fd)
	}
}
