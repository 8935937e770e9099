package xsk

import (
	"errors"
	"fmt"
)

// Sentinel errors; every error xsk returns wraps one of them (or a syscall
// errno) with context, so callers test with errors.Is.
var (
	// ErrConfig: a UMEM or socket configuration the kernel would refuse
	// (frame size, ring sizes, headroom, alignment of caller memory).
	ErrConfig = errors.New("xsk: invalid configuration")
	// ErrMemlock: registering the UMEM exceeds RLIMIT_MEMLOCK and the
	// process lacks CAP_IPC_LOCK. The wrapping *MemlockError says by how
	// much and what to raise.
	ErrMemlock = errors.New("xsk: UMEM exceeds the locked-memory limit")
	// ErrZeroCopyUnsupported: zero-copy was forced but the driver (or the
	// interface, e.g. veth) does not support it.
	ErrZeroCopyUnsupported = errors.New("xsk: zero-copy not supported on this interface/queue")
	// ErrRingLayout: the kernel's ring offsets do not fit the mapping.
	ErrRingLayout = errors.New("xsk: unexpected ring layout")
	// ErrNoFrames: the UMEM has too few frames left for the socket asked for.
	ErrNoFrames = errors.New("xsk: not enough UMEM frames")
	// ErrQueueBound: this UMEM already has a socket on that (interface, queue).
	ErrQueueBound = errors.New("xsk: queue already bound on this UMEM")
	// ErrClosed: the UMEM or socket was closed.
	ErrClosed = errors.New("xsk: closed")
	// ErrKick: sendto/recvfrom failed with an error that is not transient.
	ErrKick = errors.New("xsk: kick failed")
	// ErrTXOpen: Transmit or TransmitDescs was called while a TXReserve
	// reservation is open; TXSubmit it first.
	ErrTXOpen = errors.New("xsk: TX reservation open")
	// ErrNoRing: the operation needs a ring the socket was created without
	// (RX on a TX-only socket or the other way round).
	ErrNoRing = errors.New("xsk: socket has no such ring")
)

// MemlockError explains an XDP_UMEM_REG failure caused by RLIMIT_MEMLOCK.
type MemlockError struct {
	Need       uint64 // bytes this UMEM pins
	Limit      uint64 // current soft RLIMIT_MEMLOCK in bytes (^0: unlimited)
	HasIPCLock bool   // whether CAP_IPC_LOCK was effective (then it is not the rlimit)
	Errno      error  // what the kernel said (ENOBUFS or EPERM)
}

func (e *MemlockError) Error() string {
	lim := "unlimited"
	if e.Limit != ^uint64(0) {
		lim = fmt.Sprintf("%d KiB", e.Limit/1024)
	}
	return fmt.Sprintf("xsk: registering a UMEM of %d KiB (%d bytes) failed (%v): it is charged to "+
		"RLIMIT_MEMLOCK, which is %s (together with the UMEMs this user already pinned), and the process "+
		"lacks CAP_IPC_LOCK; raise the limit to at least %d KiB plus other UMEMs (ulimit -l, or "+
		"LimitMEMLOCK= in the systemd unit) or grant CAP_IPC_LOCK (AmbientCapabilities=CAP_IPC_LOCK)",
		e.Need/1024, e.Need, e.Errno, lim, (e.Need+1023)/1024)
}

func (e *MemlockError) Unwrap() []error { return []error{ErrMemlock, e.Errno} }
