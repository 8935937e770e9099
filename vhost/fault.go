package vhost

import (
	"github.com/xvswitch/xvswitch/guestmem"
)

// The control goroutine touches guest memory too: building a ring reads
// its indexes (tryStart), and rebinding a queue no poller rebinds flushes
// the old ring and resets the new one (waitRelease). A front-end that
// truncated the memfd behind its memory makes that touch SIGBUS. Those
// touches run under guestmem.Protect: the fault breaks this device, with
// the fault as the reason, and the control goroutine carries on tearing
// the session down. (The poll workers recover their own faults.)

// owns reports whether addr lies in the session's guest memory.
func (s *session) owns(addr uintptr) bool {
	return s.mem != nil && s.mem.ContainsHost(addr) || s.ownsLog(addr)
}

// handleProtected is handle with faults on the session's guest memory
// turned into the message's error, which ends the session as broken.
func (d *Device) handleProtected(s *session, m *message) (reply []byte, err error) {
	if ferr := guestmem.Protect(s.owns, func() { reply, err = d.handle(s, m) }); ferr != nil {
		d.log.Error("vhost: guest memory faulted while handling a request", "req", m.req.String(), "err", ferr)
		return nil, ferr
	}
	return reply, err
}

// rebindProtected is rebind for the control path (the queue's lock held).
// If guest memory faults under it, the queue is bound to a snapshot with
// nothing running, so no poller ever sees the half-rebound state, and the
// device is broken: its session ends and the next front-end starts clean.
func (q *Queue) rebindProtected(s *snapshot) {
	owns := func(addr uintptr) bool { return snapshotOwns(q.bound, addr) || snapshotOwns(s, addr) }
	err := guestmem.Protect(owns, func() { q.rebind(s) })
	if err == nil {
		return
	}
	dead := &snapshot{gen: s.gen}
	q.cur.Store(dead)
	q.bound = dead
	q.boundGen.Store(dead.gen)
	q.dev.log.Error("vhost: guest memory faulted while rebinding a queue", "queue", q.index, "err", err)
	q.dev.Break(err)
}

func snapshotOwns(s *snapshot, addr uintptr) bool {
	return s != nil && s.act != nil && s.act.Mem != nil && s.act.Mem.ContainsHost(addr)
}
