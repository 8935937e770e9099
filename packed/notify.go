package packed

import (
	"github.com/xvswitch/xvswitch/guestmem"
)

// NeedNotify reports, once per burst after Push, whether the driver asked
// for a used buffer notification for the used slots written (or skipped)
// since the previous call: its event suppression flags say enable, or (with
// EVENT_IDX) say desc and the slot at off_wrap is among them. Nothing
// pushed since the previous call means no notification.
func (r *Ring) NeedNotify() bool {
	n := r.sincePushed
	if n == 0 || r.broken {
		return false
	}
	r.sincePushed = 0
	first := !r.checked
	r.checked = true
	// Our used descriptors must be visible before we read what the driver
	// wants, or a driver that re-enabled notifications in between and then
	// found the ring empty would sleep forever.
	guestmem.Fence(&r.fence)
	ev := guestmem.LoadAcquire32(r.drv, 0) // off_wrap | flags<<16, read once
	switch uint16(ev>>16) & eventMask {
	case eventDisable:
		return false
	case eventDesc:
		if !r.eventIdx {
			return true // desc mode without EVENT_IDX is invalid: be safe
		}
	default:
		return true // enable, or the reserved value 3: be safe
	}
	if first {
		// We do not know which slots a previous ring (before a restore)
		// already notified for.
		return true
	}
	return r.passed(uint16(ev), n)
}

// passed reports whether the slot off_wrap names is one of the last n used
// slots. Positions of the used stream are numbered modulo 2*size: slot idx
// with wrap counter 1 is idx, with wrap counter 0 it is size+idx.
func (r *Ring) passed(offWrap uint16, n uint32) bool {
	size := uint32(r.size)
	m := 2 * size
	if n >= m {
		return true
	}
	now := uint32(r.usedIdx)
	if !r.usedWrap {
		now += size
	}
	ev := uint32(offWrap &^ wrapBit) // a hostile offset >= size only aliases
	if offWrap&wrapBit == 0 {
		ev += size
	}
	d := (now + m - ev%m) % m // how far behind the next used slot the event is
	return d >= 1 && d <= n
}

// EnableKicks asks the driver to notify us of new available buffers. The
// caller must Pop once more before sleeping: the fence makes that Pop see
// any buffer the driver made available before it could see our request.
func (r *Ring) EnableKicks() {
	r.setKicks(eventEnable)
	guestmem.Fence(&r.fence)
}

// DisableKicks asks the driver not to notify us (while we poll).
func (r *Ring) DisableKicks() { r.setKicks(eventDisable) }

func (r *Ring) setKicks(flags uint32) {
	if r.kicks == flags {
		return
	}
	r.kicks = flags
	guestmem.StoreRelease32(r.dev, 0, flags<<16) // off_wrap 0: unused by enable/disable
	if r.dirty != nil {
		r.dirty.LogWrite(r.dev[:eventSize])
	}
}
