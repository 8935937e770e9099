package xsk

import (
	"fmt"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// ring is the index bookkeeping every AF_XDP ring shares. Indexes are free
// running uint32 counters (they wrap; differences stay correct modulo 2^32)
// and a slot is index & mask.
//
// Ordering: the kernel's side of a ring is read with an acquire load
// (atomic Load) before touching the slots it covers, and our side is
// published with a release store (atomic Store) after writing or reading
// the slots. Cached copies avoid touching the shared words on every call.
//
// A producer ring (fill, TX): prod is ours (reserved up to), cons is the
// kernel's last seen consumer. A consumer ring (RX, completion): cons is
// ours (peeked up to), prod is the kernel's last seen producer.
type ring struct {
	producer, consumer, flags *atomic.Uint32

	size, mask uint32
	prod, cons uint32 // cached, see above
	published  uint32 // producer rings: prod as last stored; consumer rings: cons as last stored

	mem []byte // the mapping, for munmap
}

func newRing(mem []byte, off unix.XDPRingOffset, size uint32) (ring, error) {
	if size == 0 || size&(size-1) != 0 {
		return ring{}, fmt.Errorf("%w: ring size %d is not a power of two", ErrConfig, size)
	}
	p, c, f, err := ringWords(mem, off)
	if err != nil {
		return ring{}, err
	}
	r := ring{producer: p, consumer: c, flags: f, size: size, mask: size - 1, mem: mem}
	r.prod = p.Load()
	r.cons = c.Load()
	r.published = r.prod
	return r, nil
}

// --- producer side ---

// free returns how many slots can be reserved, refreshing the kernel's
// consumer index only when the cached view has fewer than want.
func (r *ring) free(want uint32) uint32 {
	n := r.size - (r.prod - r.cons)
	if n >= want {
		return n
	}
	r.cons = r.consumer.Load() // acquire: the kernel is done with those slots
	return r.size - (r.prod - r.cons)
}

// reserve claims up to n slots; it returns the first index and the count.
func (r *ring) reserve(n uint32) (idx, got uint32) {
	got = min(n, r.free(n))
	idx = r.prod
	r.prod += got
	return idx, got
}

// cancel gives back the last n reserved, unsubmitted slots.
func (r *ring) cancel(n uint32) {
	n = min(n, r.prod-r.published)
	r.prod -= n
}

// submit publishes every reserved slot (release: slot contents first).
func (r *ring) submit() {
	if r.prod != r.published {
		r.published = r.prod
		r.producer.Store(r.prod)
	}
}

// pending is how many submitted slots the kernel has not consumed yet
// (producer rings), as of the last refresh.
func (r *ring) pending() uint32 {
	r.cons = r.consumer.Load()
	return r.published - r.cons
}

// --- consumer side ---

// avail returns how many filled slots can be peeked, refreshing the
// kernel's producer index only when the cached view has fewer than want.
func (r *ring) avail(want uint32) uint32 {
	n := r.prod - r.cons
	if n >= want {
		return n
	}
	r.prod = r.producer.Load() // acquire: the slots up to prod are written
	n = r.prod - r.cons
	if n > r.size { // only a broken kernel; never read beyond the ring
		n = r.size
	}
	return n
}

// peek claims up to n filled slots; it returns the first index and count.
func (r *ring) peek(n uint32) (idx, got uint32) {
	got = min(n, r.avail(n))
	idx = r.cons
	r.cons += got
	return idx, got
}

// release hands every peeked slot back to the kernel (release: our reads
// of the slots happen before the kernel may overwrite them).
func (r *ring) release() {
	if r.cons != r.published {
		r.published = r.cons
		r.consumer.Store(r.cons)
	}
}

// needWakeup reports the kernel's XDP_RING_NEED_WAKEUP flag.
func (r *ring) needWakeup() bool {
	return r.flags.Load()&unix.XDP_RING_NEED_WAKEUP != 0
}

// addrRing is a fill or completion ring: slots are UMEM addresses.
type addrRing struct {
	ring
	slots []uint64
}

func newAddrRing(mem []byte, off unix.XDPRingOffset, size uint32) (*addrRing, error) {
	r, err := newRing(mem, off, size)
	if err != nil {
		return nil, err
	}
	s, err := addrSlots(mem, off, size)
	if err != nil {
		return nil, err
	}
	return &addrRing{ring: r, slots: s}, nil
}

func (r *addrRing) set(idx uint32, addr uint64) { r.slots[idx&r.mask] = addr }

// descRing is an RX or TX ring: slots are descriptors.
type descRing struct {
	ring
	slots []unix.XDPDesc
}

func newDescRing(mem []byte, off unix.XDPRingOffset, size uint32) (*descRing, error) {
	r, err := newRing(mem, off, size)
	if err != nil {
		return nil, err
	}
	s, err := descSlots(mem, off, size)
	if err != nil {
		return nil, err
	}
	return &descRing{ring: r, slots: s}, nil
}

func (r *descRing) slot(idx uint32) *unix.XDPDesc { return &r.slots[idx&r.mask] }

// ringMapLen is the mmap length of a ring of n slots of slotSize bytes.
func ringMapLen(off unix.XDPRingOffset, n uint32, slotSize uint64) int {
	return int(off.Desc + uint64(n)*slotSize)
}

// mapRing maps one ring of socket fd at the given page offset.
func mapRing(fd int, pgoff int64, length int) ([]byte, error) {
	mem, err := unix.Mmap(fd, pgoff, length, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return nil, fmt.Errorf("xsk: mmap ring at %#x (%d bytes): %w", pgoff, length, err)
	}
	return mem, nil
}
