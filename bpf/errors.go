package bpf

import "errors"

// Sentinel errors of the loader; returned errors wrap them with context,
// test with errors.Is.
var (
	// ErrInterface: the interface does not exist (in this network namespace).
	ErrInterface = errors.New("bpf: no such interface")
	// ErrBusy: the interface already has an XDP program that is not a stale
	// one of ours: a live xvswitch process (this one or another) owns it, or
	// something else attached a program.
	ErrBusy = errors.New("bpf: interface already has a live XDP program")
	// ErrAttach: the program could not be attached in any allowed mode.
	ErrAttach = errors.New("bpf: cannot attach XDP program")
	// ErrLoad: the kernel refused the program or its maps.
	ErrLoad = errors.New("bpf: cannot load XDP program")
	// ErrPin: bpffs could not be mounted, or pins could not be created or
	// removed under it.
	ErrPin = errors.New("bpf: cannot pin under bpffs")
	// ErrPolicy: a Policy with an unknown Mode.
	ErrPolicy = errors.New("bpf: invalid policy")
	// ErrMAC: not a 6-byte unicast Ethernet address.
	ErrMAC = errors.New("bpf: invalid MAC address")
	// ErrMACNotFound: RemoveMAC of a MAC that is not in the map.
	ErrMACNotFound = errors.New("bpf: MAC not in map")
	// ErrMACMapFull: the MAC map holds MaxMACs entries already.
	ErrMACMapFull = errors.New("bpf: MAC map full")
	// ErrQueue: a queue index outside the XSKMAP (0..MaxQueues-1).
	ErrQueue = errors.New("bpf: queue out of range")
	// ErrSocket: the kernel refused the fd for an XSKMAP slot (not a bound
	// AF_XDP socket).
	ErrSocket = errors.New("bpf: cannot put socket in XSKMAP")
	// ErrNoSocket: RemoveSocket of a queue whose slot we never filled.
	ErrNoSocket = errors.New("bpf: no socket in queue slot")
	// ErrHostAddr: not an address of a host (wrong length, unspecified or
	// multicast).
	ErrHostAddr = errors.New("bpf: invalid host address")
	// ErrHostAddrMapFull: more than MaxHostAddrs addresses of one family.
	ErrHostAddrMapFull = errors.New("bpf: host address map full")
	// ErrTracking: TrackHostAddrs while an earlier call still tracks.
	ErrTracking = errors.New("bpf: host addresses already tracked")
	// ErrClosed: the Steering was closed.
	ErrClosed = errors.New("bpf: steering closed")
)
