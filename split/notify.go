package split

import "github.com/xvswitch/xvswitch/guestmem"

// NeedNotify reports whether the driver must be interrupted for the used
// entries published since the previous call. Call it once per burst, after
// Push. Like Linux vhost and DPDK it judges each call's window
// [previous used idx, current used idx) on its own: the windows tile the
// index space, so a used_event is crossed in exactly one of them.
func (r *Ring) NeedNotify() bool {
	old, now := r.signalledUsed, r.usedIdx
	if old == now {
		return false // nothing new since the last decision
	}
	r.signalledUsed = now
	valid := r.signalledValid
	r.signalledValid = true
	// The used idx store must be visible before we read what the driver
	// asked for, or a driver re-enabling interrupts at the same moment and
	// then re-checking the ring could miss both the entry and the interrupt.
	guestmem.Fence(&r.fence)
	if r.eventIdx {
		event := guestmem.Load16(r.avail, usedEventOff(int(r.size)))
		// Until the first decision we do not know what the driver was
		// last told (a restored ring), so we notify.
		return !valid || needEvent(event, now, old)
	}
	return guestmem.Load16(r.avail, 0)&availFNoInterrupt == 0
}

// EnableKicks asks the driver to kick when it makes buffers available: with
// EVENT_IDX by setting avail_event to the next index the device will read,
// otherwise by clearing VRING_USED_F_NO_NOTIFY. The fence orders that store
// before the caller's next Pop, which must follow before it sleeps.
func (r *Ring) EnableKicks() {
	if r.eventIdx {
		guestmem.Store16(r.used, availEventOff(int(r.size)), r.lastAvail)
		r.logAvailEvent()
	} else {
		r.usedFlags &^= usedFNoNotify
		r.publishUsed()
	}
	guestmem.Fence(&r.fence)
}

// DisableKicks asks the driver not to kick while the device polls. With
// EVENT_IDX, avail_event is set one behind the next index to read: the
// driver kicks only when its avail index crosses avail_event, and its index
// never falls behind ours, so no kick comes until EnableKicks moves it
// (short of a full 2^16 lap, where one spurious kick is harmless).
func (r *Ring) DisableKicks() {
	if r.eventIdx {
		guestmem.Store16(r.used, availEventOff(int(r.size)), r.lastAvail-1)
		r.logAvailEvent()
		return
	}
	r.usedFlags |= usedFNoNotify
	r.publishUsed()
}
