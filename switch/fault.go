package vswitch

import (
	"errors"
	"fmt"
	"log/slog"
)

// ErrGuestMemoryFault means touching a guest's memory faulted: the
// front-end shrank or unmapped the file behind a region it gave us (QEMU
// seals its memfds so it cannot; DPDK's virtio-user does not). Only that
// guest's device is broken; the worker carries on.
var ErrGuestMemoryFault = errors.New("fault on guest memory")

// faultOwner is implemented by ports whose queues touch guest memory.
type faultOwner interface {
	// recoverFault reports whether host address addr lies in the port's
	// guest memory; if so it breaks the device (err says why) and, if
	// ingress is one of its queues, ends the burst the fault interrupted
	// there. It runs on the faulting worker: it must not touch queues
	// other workers poll.
	recoverFault(addr uintptr, err error, ingress rxQueue) bool
}

// forwardSafe is forward with the worker's fault handling: the workers run
// with debug.SetPanicOnFault, so a SIGBUS or SIGSEGV on guest memory
// unwinds to here.
func (w *worker) forwardSafe(snap *snapshot, rb *rxBinding) (n int, err error) {
	defer func() {
		if r := recover(); r != nil {
			n, err = 0, w.recoverFault(snap, rb, r)
		}
	}()
	return w.forward(snap, rb)
}

// recoverFault cleans up after a fault in the middle of a burst: the output
// queue's lock is released, the guest whose memory faulted is broken, and
// the ingress queue's frames are given back (unless they were that
// guest's). Anything but a memory fault is a bug and panics on.
func (w *worker) recoverFault(snap *snapshot, rb *rxBinding, r any) error {
	f, ok := r.(interface{ Addr() uintptr })
	if !ok {
		panic(r)
	}
	if w.held != nil {
		w.held.mu.Unlock()
		w.held = nil
	}
	// Whatever the interrupted burst tallied is void.
	w.rc, w.tc = burstCounts{}, burstCounts{}
	addr := f.Addr()
	err := fmt.Errorf("%w at %#x: %v", ErrGuestMemoryFault, addr, r)
	culprit := ""
	for _, p := range snap.ports {
		if p == nil {
			continue
		}
		if o, ok := p.drv.(faultOwner); ok && o.recoverFault(addr, err, rb.q) {
			culprit = p.name
			break
		}
	}
	slog.Error("worker: memory fault in a burst", "worker", w.id, "ingress", rb.port.name, "guest", culprit, "err", err)
	if culprit == "" {
		// Not guest memory: a bug of ours. Crash loudly rather than
		// forward on corrupted state.
		panic(r)
	}
	if culprit != rb.port.name {
		// The ingress frames were fine; give their buffers back. A second
		// fault here is the same guest's memory again: leave it.
		func() {
			defer func() { _ = recover() }()
			_ = rb.q.release(&w.fb)
		}()
	}
	return nil
}
