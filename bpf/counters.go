package bpf

// Counters are the program's per-verdict frame counts for one interface,
// summed over CPUs. Each frame the program sees adds one to exactly one of
// the first seven fields, GroupPassed or OwnedQueuePassed (see Total);
// SteeredBroadcast and SteeredMulticast break down the steered ones
// (Redirected + NoSocketPassed + BadQueuePassed + OwnedQueuePassed).
// Field names match the C struct xvs_counters' (up to the
// case of initialisms), which bpftool prints in snake case.
type Counters struct {
	// Redirected: steered, and the rx queue's XSKMAP slot held a socket.
	// A frame can still be lost inside the socket (RX ring full); the
	// socket's XDP_STATISTICS count that.
	Redirected uint64
	// NoSocketPassed: steered, but the slot was empty, so the frame went to
	// the kernel (the redirect's fallback) instead.
	NoSocketPassed uint64
	// BadQueuePassed: steered, but the rx queue is beyond the XSKMAP
	// (MaxQueues): passed to the kernel.
	BadQueuePassed uint64
	// NotOwnedPassed: not the switch's frame under the policy: passed.
	NotOwnedPassed uint64
	// ShortPassed: shorter than an Ethernet header: passed (the kernel
	// drops it).
	ShortPassed uint64
	// HostARPPassed: a broadcast or multicast ARP packet the MAC policy
	// would have steered, passed instead because its target protocol
	// address is one of the host's (SetHostAddrs, TrackHostAddrs).
	HostARPPassed uint64
	// HostNDPassed: likewise an IPv6 Neighbor Solicitation whose target
	// is one of the host's addresses.
	HostNDPassed uint64
	// SteeredBroadcast and SteeredMulticast: of the steered frames, those
	// to the broadcast address and to other group addresses.
	SteeredBroadcast uint64
	SteeredMulticast uint64
	// GroupPassed: in ModeMAC, a broadcast or multicast frame the policy
	// does not steer (its Broadcast or Multicast flag unset), passed to
	// the kernel. It is counted apart from NotOwnedPassed (then unicast
	// alone) because a switch that leaves group frames to the host takes
	// its own copies of them from the kernel (package afpacket).
	GroupPassed uint64
	// OwnedQueuePassed: steered, but it arrived on a queue a VM owns
	// (SetQueueOwner) and is not to that VM's MAC: passed to the kernel,
	// never redirected into the owner's memory.
	OwnedQueuePassed uint64
}

// Total is the number of frames the program has seen.
func (c Counters) Total() uint64 {
	return c.Redirected + c.NoSocketPassed + c.BadQueuePassed + c.NotOwnedPassed + c.ShortPassed +
		c.HostARPPassed + c.HostNDPassed + c.GroupPassed + c.OwnedQueuePassed
}

// Steered is the number of frames the policy gave to the switch, whether or
// not a socket took them.
func (c Counters) Steered() uint64 {
	return c.Redirected + c.NoSocketPassed + c.BadQueuePassed + c.OwnedQueuePassed
}

// HostPassed is the number of group frames passed to the kernel because
// they resolve one of the host's addresses.
func (c Counters) HostPassed() uint64 {
	return c.HostARPPassed + c.HostNDPassed
}

// Sub returns c - old, field by field: the frames counted since old was read.
func (c Counters) Sub(old Counters) Counters {
	return Counters{
		Redirected:       c.Redirected - old.Redirected,
		NoSocketPassed:   c.NoSocketPassed - old.NoSocketPassed,
		BadQueuePassed:   c.BadQueuePassed - old.BadQueuePassed,
		NotOwnedPassed:   c.NotOwnedPassed - old.NotOwnedPassed,
		ShortPassed:      c.ShortPassed - old.ShortPassed,
		HostARPPassed:    c.HostARPPassed - old.HostARPPassed,
		HostNDPassed:     c.HostNDPassed - old.HostNDPassed,
		SteeredBroadcast: c.SteeredBroadcast - old.SteeredBroadcast,
		SteeredMulticast: c.SteeredMulticast - old.SteeredMulticast,
		GroupPassed:      c.GroupPassed - old.GroupPassed,
		OwnedQueuePassed: c.OwnedQueuePassed - old.OwnedQueuePassed,
	}
}

// sumCounters adds up the per-CPU copies of the C struct.
func sumCounters(perCPU []steerXvsCounters) Counters {
	var s Counters
	for _, v := range perCPU {
		s.Redirected += v.Redirected
		s.NoSocketPassed += v.NoSocketPassed
		s.BadQueuePassed += v.BadQueuePassed
		s.NotOwnedPassed += v.NotOwnedPassed
		s.ShortPassed += v.ShortPassed
		s.HostARPPassed += v.HostArpPassed
		s.HostNDPassed += v.HostNdPassed
		s.SteeredBroadcast += v.SteeredBroadcast
		s.SteeredMulticast += v.SteeredMulticast
		s.GroupPassed += v.GroupPassed
		s.OwnedQueuePassed += v.OwnedQueuePassed
	}
	return s
}
