package split

// Split ring layout (virtio 1.x, 2.7). All fields are little-endian.
//
//	descriptor table: size x {addr u64, len u32, flags u16, next u16}
//	avail ring:       flags u16, idx u16, ring[size] u16, used_event u16
//	used ring:        flags u16, idx u16, ring[size] {id u32, len u32}, avail_event u16
const (
	descSize = 16

	// Descriptor flags.
	descFNext     = 1
	descFWrite    = 2
	descFIndirect = 4

	// availFNoInterrupt in the avail flags asks the device not to interrupt
	// (ignored with EVENT_IDX, where used_event says when).
	availFNoInterrupt = 1
	// usedFNoNotify in the used flags asks the driver not to kick (ignored
	// with EVENT_IDX, where avail_event says when).
	usedFNoNotify = 1

	// Alignments: the spec asks 16 for the table, 2 for the avail ring and 4
	// for the used ring. We ask 4 for the avail ring: see availAlign.
	descAlign = 16
	usedAlign = 4
	// availAlign is stricter than the spec's 2 because flags|idx is read as
	// one 32-bit atomic load, which is what gives the acquire ordering the
	// avail entries need. A 2-aligned-only avail ring would need a 16-bit
	// load plus a separate barrier, and a misaligned 32-bit atomic faults on
	// arm64. No real driver produces one: Linux, QEMU, DPDK virtio-user and
	// the legacy vring_init layout all place the avail ring right after the
	// descriptor table (16*size bytes after a 16-aligned base), so it is
	// always 16-aligned. Such a ring is refused with virtq.ErrBadConfig.
	availAlign = 4

	// maxSize is the largest split ring (2^15, virtio 1.x 2.7).
	maxSize = 32768
)

func descTableLen(size int) uint64 { return uint64(descSize * size) }
func availLen(size int) uint64     { return uint64(6 + 2*size) }
func usedLen(size int) uint64      { return uint64(6 + 8*size) }

// usedEventOff is where used_event sits in the avail ring.
func usedEventOff(size int) int { return 4 + 2*size }

// availEventOff is where avail_event sits in the used ring.
func availEventOff(size int) int { return 4 + 8*size }

// needEvent is vring_need_event of the virtio spec: whether moving an index
// from old to new crosses event, i.e. event is in [old, new) modulo 2^16.
func needEvent(event, new, old uint16) bool {
	return new-event-1 < new-old
}
