package vhost

import (
	"fmt"

	"github.com/xvswitch/xvswitch/packed"
	"github.com/xvswitch/xvswitch/virtq"
)

// Where a packed ring starts after its back-end died (docs/reconnect.md).
//
// A front-end that lost its back-end without GET_VRING_BASE cannot say
// where a packed ring stood: QEMU sends the new back-end whatever it last
// sent or got (the state of the ring's first setup, typically), where the
// guest's driver no longer is, and the ring would wait forever for
// descriptors the driver made available laps ago. So a base that came from
// the front-end is checked against the descriptors (packed.Resume), and
// where they disagree the ring starts where they say. A base a ring of
// ours saved when it stopped is exact and used as is. Split rings need
// none of this: the front-end restores them from the used index in guest
// memory.

// startBase is the state q's ring is built from: cfg.Base (the front-end's
// SET_VRING_BASE, or what our last ring saved), or for a packed ring the
// position its descriptors give when the front-end's base disagrees with
// them; resumed says it did, or that Resume used chains itself (a batch
// the dead back-end was publishing, chains a front-end's own run cut off):
// either way the guest is to be interrupted. dropped is how many chains
// the guest queued Resume completed unsent, for the queue's drop counters.
func (d *Device) startBase(s *session, q *Queue, cfg virtq.Config) (base uint32, resumed bool, dropped int) {
	if !s.packed() || q.ctl.baseOwn {
		return cfg.Base, false, 0
	}
	res, err := packed.Resume(cfg)
	if res.Dropped > 0 {
		d.log.Warn("vhost: dropped the transmit chains the guest had pending before the front-end's own used ones (it served the ring while no back-end ran); resuming after them",
			"queue", q.index, "dropped", res.Dropped, "base", fmt.Sprintf("%#x", cfg.Base))
	}
	if res.Torn {
		d.log.Warn("vhost: completed the batch of used descriptors a dead back-end was publishing", "queue", q.index)
	}
	switch {
	case err != nil:
		d.log.Warn("vhost: cannot check the packed ring's base against its descriptors; starting from the front-end's",
			"queue", q.index, "base", fmt.Sprintf("%#x", cfg.Base), "err", err)
	case res.Base != cfg.Base:
		d.log.Warn("vhost: the front-end's base for a packed ring is not where its descriptors say the device stopped (a back-end died?); resuming from the descriptors",
			"queue", q.index, "base", fmt.Sprintf("%#x", cfg.Base), "resumed", fmt.Sprintf("%#x", res.Base))
		return res.Base, true, res.Dropped
	}
	return res.Base, res.Dropped > 0 || res.Torn, res.Dropped
}

// signalResumed interrupts the guest once on a ring that resumed: the dead
// back-end may have published used buffers without the interrupt, and a
// driver that sleeps until one (a transmit queue stopped on a full ring)
// would wait for good. A spurious interrupt costs the guest a look. The
// session's Notifier writes it, so a call eventfd the front-end keeps full
// cannot block the control path.
func (d *Device) signalResumed(s *session, q *Queue) {
	s.callLine(q.index).Signal()
}
