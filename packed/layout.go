package packed

// The packed ring's memory layout (virtio 1.1, 2.7.13 and 2.7.14).
//
// A descriptor is 16 bytes: le64 addr, le32 len, le16 id, le16 flags. The id
// and flags share the aligned 32-bit word at offset 12, so one atomic access
// reads or publishes both, and a used descriptor becomes visible with its id
// in one store.
const (
	descSize    = 16
	offAddr     = 0
	offLen      = 8
	offIDFlags  = 12 // id in the low half, flags in the high half
	maxRingSize = 1 << 15
)

// Descriptor flags.
const (
	flagNext     = 1 << 0
	flagWrite    = 1 << 1
	flagIndirect = 1 << 2
	flagAvail    = 1 << 7
	flagUsed     = 1 << 15
)

// Event suppression area: le16 off_wrap (offset in bits 0-14, wrap counter
// in bit 15), le16 flags. Both sides read and write it as one 32-bit word.
const (
	eventSize    = 4
	eventEnable  = 0
	eventDisable = 1
	eventDesc    = 2 // only meaningful with EVENT_IDX
	eventMask    = 3
	wrapBit      = 1 << 15
)

// InitialState is the ring state of a fresh packed ring as vhost-user
// front-ends send it in SET_VRING_BASE: both indexes 0, both wrap counters 1
// (the spec initialises them to 1).
const InitialState uint32 = wrapBit | wrapBit<<16

// availBits is what an available descriptor's AVAIL and USED flags are while
// the driver's wrap counter is wrap: AVAIL equal to it, USED its inverse.
func availBits(wrap bool) uint16 {
	if wrap {
		return flagAvail
	}
	return flagUsed
}

// usedBits is what the device writes into a used descriptor's flags while
// its wrap counter is wrap: AVAIL and USED both equal to it.
func usedBits(wrap bool) uint16 {
	if wrap {
		return flagAvail | flagUsed
	}
	return 0
}
