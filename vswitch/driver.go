package vswitch

import "github.com/xvswitch/xvswitch/ctl"

// PortDriver is what a kind of port (AF_XDP NIC, vhost-user device, the
// benchmark generator) gives the switch. Its queues are created once; a
// vhost device whose guest comes and goes keeps its queues and reports the
// guest's absence by dropping frames as "port_down".
//
// Queue directions are the switch's: an ingress queue is where frames
// enter the switch from the port (for a VM, the guest's TX virtqueue), an
// egress queue where they leave it (the guest's RX virtqueue).
type PortDriver interface {
	IngressQueues() []IngressQueue
	EgressQueues() []EgressQueue
	// Info fills the kind, state, queues and detail columns of `show
	// ports` (the switch fills the name and cross-connect peer).
	Info() ctl.PortInfo
	// Fail is told that a queue of the port broke (a guest broke its
	// ring): the driver marks its device broken, says why in the log, and
	// its queues report nothing until a guest sets it up again.
	Fail(err error)
	// Close stops the port and releases what it holds. Workers no longer
	// touch its queues when it is called.
	Close() error
}

// IngressQueue is where frames enter the switch from one (port, queue)
// pair. Exactly one worker polls it, so its methods need no locking. One
// call per burst.
type IngressQueue interface {
	// Receive fills b with up to MaxBurst frames and returns how many.
	// Frames the queue itself rejects (a malformed guest chain, say) never
	// reach b: it counts them in c as received and dropped, so they do
	// not disappear. An error means the queue broke: the worker tells the
	// port's driver (Fail).
	Receive(b *Burst, c *Counts) (int, error)
	// Release returns the buffers of the frames last received (UMEM
	// frames to the fill ring, guest chains to the guest as used), once
	// every destination has copied them.
	Release(b *Burst) error
	// Waker says how a sleeping worker learns of new frames.
	Waker() Waker
}

// Waker is how one ingress queue wakes its worker from epoll.
type Waker struct {
	// FD becomes readable when frames arrive. FD < 0 means the queue
	// cannot wake anyone: its worker keeps polling.
	FD int
	// Arm asks the peer to signal FD for new frames (vhost: re-enable
	// kicks). The worker polls the queue once more after arming, so a
	// frame that arrived just before it is not left waiting.
	Arm func()
	// Disarm stops the signals while the worker polls again.
	Disarm func()
	// Drain consumes a wake-up (reads the eventfd).
	Drain func()
}

// EgressQueue is where frames leave the switch on one (port, queue) pair.
// Several workers may transmit on it; each holds the queue's lock for a
// whole burst.
type EgressQueue interface {
	// Transmit sends the frames of b selected by m, adding to c what it
	// transmitted and, by reason, what it dropped.
	Transmit(b *Burst, m Mask, c *Counts)
}

// kernelCounter is implemented by ports whose kernel side keeps counters
// of its own (see ctl.PortCounters.Kernel). KernelCounters must name every
// key it returns: the metrics have a series only for those.
type kernelCounter interface {
	kernelCounters() map[string]uint64
}

// macSteerer is implemented by ports whose XDP program must be told the
// MACs the switch owns (the VMs' MACs), so the host keeps the rest.
type macSteerer interface {
	setMACs(macs []uint64) error
}
