package vswitch

import "errors"

var (
	// ErrNoPort means a named port does not exist.
	ErrNoPort = errors.New("vswitch: no such port")
	// ErrPortExists means a port of that name is already on the switch.
	ErrPortExists = errors.New("vswitch: port exists")
	// ErrTooManyPorts means the switch has no free port index (MaxPorts).
	ErrTooManyPorts = errors.New("vswitch: too many ports")
	// ErrBadConfig means the switch's configuration is inconsistent
	// (duplicate names, a cross-connect naming a missing port, a worker
	// count out of range).
	ErrBadConfig = errors.New("vswitch: bad configuration")
	// ErrGuestMemoryFault means touching a guest's memory faulted: the
	// front-end shrank or unmapped the file behind a region it gave us
	// (QEMU seals its memfds so it cannot; DPDK's virtio-user does not).
	// Only that guest's device is broken; the worker carries on.
	ErrGuestMemoryFault = errors.New("vswitch: fault on guest memory")
)
