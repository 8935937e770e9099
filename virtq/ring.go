package virtq

import "github.com/xvswitch/xvswitch/guestmem"

// Config describes a ring as vhost-user sets it up.
type Config struct {
	Mem  *guestmem.Memory
	Size uint16 // descriptors: split needs a power of two up to 32768; packed any 1..32768
	// Ring areas, as front-end virtual addresses (SET_VRING_ADDR):
	// split: descriptor table, avail ring, used ring;
	// packed: descriptor ring, driver event suppression, device event suppression.
	Desc, Driver, Device uint64
	// Features is the negotiated virtio feature word; the ring looks at
	// INDIRECT_DESC, EVENT_IDX and IN_ORDER.
	Features uint64
	// Base is the state from SET_VRING_BASE (see State).
	Base uint32
	// ReadOnly says the device only reads this ring's buffers (a
	// virtio-net transmit queue): WRITE flags are ignored, so every buffer
	// comes back readable. DPDK 22.11's virtio driver marks the header
	// descriptor of its packed-ring indirect tables WRITE by mistake;
	// refusing those chains would break every multi-segment sender.
	ReadOnly bool
}

// Ring is the device side of one virtqueue. It is owned by exactly one
// goroutine at a time and is not safe for concurrent use.
type Ring interface {
	// Pop resets b, fills it with up to max (at most MaxBurst) available
	// chains and returns how many it popped. A non-nil error
	// means the guest broke the ring: the ring is broken from then on.
	Pop(b *Burst, max int) (int, error)
	// Push returns chains to the driver as used, in the order given.
	Push(used []Used) error
	// NeedNotify reports, once per burst after Push, whether the driver
	// asked to be interrupted for what was pushed since the last time it
	// returned true (flags or EVENT_IDX used_event / packed off_wrap).
	NeedNotify() bool
	// EnableKicks asks the driver to kick on new buffers (before a worker
	// sleeps); DisableKicks asks it not to (while the worker polls).
	// After EnableKicks a caller must Pop once more before sleeping.
	EnableKicks()
	DisableKicks()
	// InFlight is how many popped chains are not yet pushed.
	InFlight() int
	// Size is the ring's number of descriptors (the driver's queue size).
	Size() int
	// State returns the ring state as GET_VRING_BASE carries it. For split:
	// the next avail index to read. For packed: bits 0-14 the next avail
	// index, bit 15 its wrap counter, bits 16-30 the next used index, bit
	// 31 its wrap counter.
	State() uint32
}
