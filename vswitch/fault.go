package vswitch

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"

	"github.com/xvswitch/xvswitch/guestmem"
)

// ErrGuestMemoryFault means touching a guest's memory faulted: the
// front-end shrank or unmapped the file behind a region it gave us (QEMU
// seals its memfds so it cannot; DPDK's virtio-user does not). Only that
// guest's device is broken; the worker carries on.
var ErrGuestMemoryFault = errors.New("vswitch: fault on guest memory")

// faultOwner is implemented by ports whose queues touch guest memory.
type faultOwner interface {
	// recoverFault reports whether host address addr lies in the port's
	// guest memory; if so it breaks the device (err says why) and, if
	// ingress is one of its queues, ends the burst the fault interrupted
	// there and lets go of the queue for worker (the faulting one, which
	// polls ingress: vhost.Queue.Hold). It runs on the faulting worker: it
	// may read, never change, queues other workers poll.
	recoverFault(addr uintptr, err error, ingress IngressQueue, worker int) bool
}

// forwardSafe is forward with the worker's fault handling: the workers run
// with debug.SetPanicOnFault, so a SIGBUS or SIGSEGV on guest memory
// unwinds to here.
func (w *worker) forwardSafe(snap *snapshot, in *ingress) (n int, err error) {
	defer func() {
		if r := recover(); r != nil {
			n, err = 0, w.recoverFault(snap, in, r)
		}
	}()
	return w.forward(snap, in)
}

// touchSafe runs fn, one of in's Waker calls (nil: none), with the
// worker's fault handling; what names it for the log. Arming, disarming
// and draining a vhost queue write its guest's ring (or rebind it) outside
// any burst, and a guest may truncate its memory while the worker sleeps:
// that guest is broken and the worker goes on with the others.
func (w *worker) touchSafe(snap *snapshot, in *ingress, fn func(), what string) {
	if fn == nil {
		return
	}
	defer func() {
		if r := recover(); r != nil {
			if _, ok := guestmem.FaultAddr(r); ok && slices.Contains(w.slept, in.port.name) {
				// Broken a moment ago by this worker (arming faulted,
				// now disarming does): its teardown runs on the control
				// path and may have let go of the memory's bounds, so the
				// address no longer names it. Nothing more to break.
				slog.Warn("worker: memory fault on a guest broken during this sleep", "worker", w.id, "while", what, "guest", in.port.name)
				return
			}
			w.slept = append(w.slept, w.breakFaulting(snap, in, r, what))
		}
	}()
	fn()
}

// recoverFault cleans up after a fault in the middle of a burst: the output
// queue's lock is released, the guest whose memory faulted is broken, and
// the ingress queue's frames are given back (unless they were that
// guest's). Anything but a memory fault on a guest's memory is a bug and
// panics on.
func (w *worker) recoverFault(snap *snapshot, in *ingress, r any) error {
	culprit := w.breakFaulting(snap, in, r, "in a burst")
	if w.held != nil {
		w.held.mu.Unlock()
		w.held = nil
	}
	w.accountFault(in)
	if culprit != in.port.name {
		// The ingress frames were fine; give their buffers back.
		w.releaseAfterFault(snap, in)
	}
	return nil
}

// breakFaulting handles what the worker recovered (r) while touching in's
// queue (while says how): a fault on a guest's memory breaks that guest's
// device, with ErrGuestMemoryFault and a log line, and returns its port's
// name. Anything else, a fault on memory no guest owns included, is a bug
// of ours and panics on rather than forward on corrupted state.
func (w *worker) breakFaulting(snap *snapshot, in *ingress, r any, while string) string {
	addr, ok := guestmem.FaultAddr(r)
	if !ok {
		panic(r)
	}
	err := fmt.Errorf("%w at %#x (%s): %v", ErrGuestMemoryFault, addr, while, r)
	culprit := breakOwner(snap, addr, err, in.q, w.id)
	slog.Error("worker: memory fault", "worker", w.id, "while", while, "queue of", in.port.name, "guest", culprit, "err", err)
	if culprit == "" {
		panic(r)
	}
	return culprit
}

// breakOwner finds the port whose guest memory holds addr, breaks it and
// returns its name ("" if no port owns addr).
func breakOwner(snap *snapshot, addr uintptr, err error, ingress IngressQueue, worker int) string {
	for _, p := range snap.ports {
		if p == nil {
			continue
		}
		if o, ok := p.drv.(faultOwner); ok && o.recoverFault(addr, err, ingress, worker) {
			return p.name
		}
	}
	return ""
}

// releaseAfterFault returns the ingress queue's frames after a fault on
// another port's memory. Returning them touches the ingress port's own
// guest memory: if that faults too, that guest is broken as well (its
// port ends the burst). Any other panic is a bug and goes on.
func (w *worker) releaseAfterFault(snap *snapshot, in *ingress) {
	defer func() {
		if r := recover(); r != nil {
			w.breakFaulting(snap, in, r, "returning its frames")
		}
	}()
	_ = in.q.Release(&w.fb)
}

// accountFault counts the burst a fault interrupted, so that its frames do
// not disappear: on in's counters, as received and, what had not been
// transmitted yet, dropped as memory_fault. The faulting output queue's
// partial tally is void (its frames count as dropped, though some may
// have reached that guest before its memory went).
func (w *worker) accountFault(in *ingress) {
	w.tc = Counts{}
	switch {
	case w.inFlight == 0:
		// The fault came in Receive: nothing of the burst was taken.
		w.rc = Counts{}
	case !w.egressing:
		// While classifying (reading headers): none was sent anywhere.
		w.rc = Counts{}
		var bytes uint64
		for i := 0; i < w.inFlight; i++ {
			bytes += uint64(w.fb.table().FrameLen(i))
		}
		w.rc.Frames(uint64(w.inFlight), bytes)
		w.rc.DropN(DropMemoryFault, w.inFlight)
	default:
		w.rc.DropN(DropMemoryFault, w.owed)
	}
	w.rc.flushIngress(in.stats)
	w.inFlight, w.egressing, w.owed = 0, false, 0
}
