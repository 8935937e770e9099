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
	dirty bool  // local differs from pub

	pub struct {
		packets, bytes, notifies atomic.Uint64
		drops                    [NumDropReasons]atomic.Uint64
	}
}

// begin starts a burst: LastBurst reports from here on.
func (c *counters) begin() { c.burst = Stats{} }

func (c *counters) drop(r DropReason, n int) {
	c.local.Drops[r] += uint64(n)
	c.burst.Drops[r] += uint64(n)
	c.dirty = true
}

func (c *counters) pass(frames int, bytes int) {
	if frames == 0 && bytes == 0 {
		// An empty poll changes nothing: it must not cost a publish
		// (ten atomic stores) on every poll of an idle ring.
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
// the end of every burst that changed them.
func (c *counters) publish() {
	if !c.dirty {
		return
	}
	c.dirty = false
	c.pub.packets.Store(c.local.Packets)
	c.pub.bytes.Store(c.local.Bytes)
	c.pub.notifies.Store(c.local.Notifies)
	for i := range c.local.Drops {
		c.pub.drops[i].Store(c.local.Drops[i])
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
