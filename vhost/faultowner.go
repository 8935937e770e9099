package vhost

import "github.com/xvswitch/xvswitch/guestmem"

// Whose memory faulted, after the queue's lock is let go.
//
// A worker that faults on guest memory asks each port's queues (Owns)
// whose memory the address is, and breaks that guest. A burst out of
// Begin lets go of the queue's lock on its way out of the panic (a
// deferred End or Abort), and a rebind that faults inside Begin or Hold
// does too, before the worker's recovery asks. In between, the control
// path may take the lock and rebind the queue itself (a front-end that
// stops the ring, or sends a new memory table, right after truncating the
// old one), which replaces boundMem and nextMem: the address would then
// belong to nobody, and the worker would take the fault for a bug of its
// own and panic. So what the burst could touch is recorded before the
// lock goes, and Owns consults it once.
//
// Consumed by the first Owns that finds the address in it, so that it
// cannot name this guest for a later fault at the same address once the
// memory is unmapped and the range maps another guest's; a record whose
// fault was attributed through boundMem or nextMem stays until the next
// fault replaces it, and can at worst take one later fault for this
// guest's (already broken), the next one then finding its real owner.

// faultedMem is the memory a faulting burst or rebind may have touched.
type faultedMem struct {
	bound, next *guestmem.Memory
}

// noteFault records it; called with the lock held, before it is let go.
// It allocates, on a fault's path only.
func (q *Queue) noteFault() {
	q.faulted.Store(&faultedMem{bound: q.boundMem.Load(), next: q.nextMem.Load()})
}

// ownsFaulted reports whether addr lies in the recorded memory, consuming
// the record if so.
func (q *Queue) ownsFaulted(addr uintptr) bool {
	f := q.faulted.Load()
	if f == nil {
		return false
	}
	for _, m := range [2]*guestmem.Memory{f.bound, f.next} {
		if m != nil && m.ContainsHost(addr) {
			q.faulted.CompareAndSwap(f, nil)
			return true
		}
	}
	return false
}

// EndBurst ends a burst of Begin, deferred with a flag the burst sets as
// its last step: End if it finished (*ok), Abort if a fault interrupted it.
func (q *Queue) EndBurst(ok *bool) {
	if *ok {
		q.End()
		return
	}
	q.Abort()
}
