package virtionet

import "sync/atomic"

// Stats are a queue's counters. For a TX queue, Packets and Bytes count the
// frames the guest sent that were handed to the caller, and Drops the chains
// rejected before that; for an RX queue, Packets and Bytes count the frames
// delivered into the guest and Drops the frames given to Deliver that were
// not. Either way: frames in = Packets + Dropped(). Bytes are Ethernet frame
// bytes, without the virtio-net header.
type Stats struct {
	Packets uint64
	Bytes   uint64
	Drops   [NumDropReasons]uint64
	// Notifies counts the interrupts asked of the Notifier (bursts after
	// which the guest wanted one; one raised again before the Notifier
	// wrote the first is written once).
	Notifies uint64
}

// Dropped is the sum of Drops.
func (s *Stats) Dropped() uint64 {
	var n uint64
	for _, d := range s.Drops {
		n += d
	}
	return n
}

// counters are a queue's Stats: a plain copy the owning worker updates per
// frame, and an atomic copy it publishes once per burst for Snapshot, so
// that the per-frame cost is an ordinary increment and readers on other
// goroutines still see whole (if slightly old) values.
type counters struct {
	local Stats
	burst Stats // what the current (or last) burst added, for LastBurst
	// dirty: Packets, Bytes or Notifies may differ from pub; dropped: a
	// Drops entry may. Kept apart so that a burst without drops does not
	// publish the drop counters.
	dirty, dropped bool
	// burstDropped: the current (or last) burst counted a drop, so that
	// the switch reads the burst's drops (LastBurstDrops) only then.
	burstDropped bool

	pub struct {
		packets, bytes, notifies atomic.Uint64
		drops                    [NumDropReasons]atomic.Uint64
	}
}

// begin starts a burst: LastBurst reports from here on.
func (c *counters) begin() { c.burst, c.burstDropped = Stats{}, false }

func (c *counters) drop(r DropReason, n int) {
	c.local.Drops[r] += uint64(n)
	c.burst.Drops[r] += uint64(n)
	c.dropped, c.burstDropped = true, true
}

func (c *counters) pass(frames int, bytes int) {
	if frames == 0 && bytes == 0 {
		// An empty poll changes nothing: it must not cost a publish
		// (atomic stores, each a barrier) on every poll of an idle ring.
		return
	}
	c.local.Packets += uint64(frames)
	c.local.Bytes += uint64(bytes)
	c.burst.Packets += uint64(frames)
	c.burst.Bytes += uint64(bytes)
	c.dirty = true
}

func (c *counters) notified() {
	c.local.Notifies++
	c.burst.Notifies++
	c.dirty = true
}

// publish makes the worker's counters visible to Snapshot. Called once at
// the end of every burst that changed them. It stores only the values that
// changed: an atomic store is an XCHG on amd64, a full barrier that waits
// until every store before it (the burst's frames and used entries, into
// lines the guest's core holds) has left the store buffer; a burst used to
// publish 3 + NumDropReasons of them (perf annotate of switch -> VM, split,
// 64 B, shows what one costs there: the used index's XCHG holds 99% of
// publishUsed's samples). A load of the published value is a plain load.
func (c *counters) publish() {
	if c.dirty || c.dropped {
		c.publishChanged()
	}
}

func (c *counters) publishChanged() {
	if c.dirty {
		c.dirty = false
		storeIfChanged(&c.pub.packets, c.local.Packets)
		storeIfChanged(&c.pub.bytes, c.local.Bytes)
		storeIfChanged(&c.pub.notifies, c.local.Notifies)
	}
	if c.dropped {
		c.dropped = false
		for i := range c.local.Drops {
			storeIfChanged(&c.pub.drops[i], c.local.Drops[i])
		}
	}
}

// storeIfChanged publishes v in p unless p holds it already. Only the
// owning worker stores into p, so the load cannot miss a newer value.
func storeIfChanged(p *atomic.Uint64, v uint64) {
	if p.Load() != v {
		p.Store(v)
	}
}

func (c *counters) snapshot() Stats {
	var s Stats
	s.Packets = c.pub.packets.Load()
	s.Bytes = c.pub.bytes.Load()
	s.Notifies = c.pub.notifies.Load()
	for i := range s.Drops {
		s.Drops[i] = c.pub.drops[i].Load()
	}
	return s
}
