package split

import (
	"fmt"

	"github.com/xvswitch/xvswitch/guestmem"
	"github.com/xvswitch/xvswitch/virtq"
)

// Ring is the device side of one split virtqueue. It is owned by one
// goroutine at a time (see virtq.Ring).
type Ring struct {
	mem *guestmem.Memory
	// dirty is mem while its writes are logged (live migration), else
	// nil: the one check the write paths make (dirtylog.go).
	dirty *guestmem.Memory
	desc  []byte // descriptor table, 16*size bytes, 16-aligned
	avail []byte // avail ring, 6+2*size bytes, 4-aligned
	used  []byte // used ring, 6+8*size bytes, 4-aligned
	// writeMask is descFWrite, or 0 on a ReadOnly ring (virtq.Config).
	writeMask uint16
	hint      guestmem.Hint // region of the last buffer translated (pop.go)

	size uint32 // a power of two, 1..32768
	mask uint16

	eventIdx bool // VIRTIO_F_EVENT_IDX negotiated
	indirect bool // VIRTIO_F_INDIRECT_DESC negotiated

	lastAvail uint16 // next avail ring entry to read
	usedIdx   uint16 // used idx as last published
	usedFlags uint16 // the used flags word; the device owns it

	// signalledUsed is usedIdx when NeedNotify last ran; signalledValid is
	// false until it has run once (then we cannot know what the driver was
	// last told, so the first decision errs on the side of notifying).
	signalledUsed  uint16
	signalledValid bool

	// inFlight[head] is set from Pop to Push. A fixed array sized at New:
	// it catches a head the driver reuses while the device still owns it,
	// and a device that completes a head twice.
	inFlight  []bool
	nInFlight int
	// writeLen[head] is the writable byte count of the chain in flight at
	// head: Push clamps used lengths to it, so that a bug in the switch
	// can never tell a guest more was written than its buffer holds.
	writeLen []uint32

	// err is the first error a hostile ring produced; once set the ring is
	// broken and every call returns it.
	err error

	// fence is the word guestmem.Fence operates on; it lives in the Ring so
	// that workers on different rings do not share it.
	fence uint32

	// straddle holds the segments of one indirect descriptor that crosses
	// a region boundary (rare; see readIndirect).
	straddle [descSize][]byte

	// touched keeps touchAhead's loads from being optimised away.
	touched uint16

	// stamps catch a head given twice in one Fill (fill.go).
	stamps virtq.FillStamps
	// streaming chooses how Fill writes a Linux guest's short frames.
	streaming guestmem.StreamChoice
}

var _ virtq.Ring = (*Ring)(nil)

// New builds the device side of a split ring from its vhost-user setup.
//
// cfg.Base is the next avail index to read (SET_VRING_BASE). The used index
// is read back from the used ring rather than assumed equal to Base, as
// libvhost-user does: if the previous owner of the ring saved its state with
// chains still in flight, the used ring lags Base, and publishing Base+1 as
// the next used index would hand the driver used entries nobody wrote. Those
// chains are lost (the driver never gets them back) unless the front-end
// tracks in-flight descriptors itself. DPDK instead rewinds the avail index
// to the used index and processes them again; that is only right when the
// previous owner completed in order, so we do not.
func New(cfg virtq.Config) (*Ring, error) {
	size := int(cfg.Size)
	if size == 0 || size > maxSize || size&(size-1) != 0 {
		return nil, fmt.Errorf("%w: split ring size %d is not a power of two in 1..%d", virtq.ErrBadConfig, size, maxSize)
	}
	if cfg.Mem == nil {
		return nil, fmt.Errorf("%w: no guest memory", virtq.ErrBadConfig)
	}
	if cfg.Base > 0xffff {
		return nil, fmt.Errorf("%w: split ring base %#x does not fit 16 bits", virtq.ErrBadConfig, cfg.Base)
	}
	desc, err := cfg.Mem.TranslateUser(cfg.Desc, descTableLen(size), descAlign)
	if err != nil {
		return nil, fmt.Errorf("%w: descriptor table at %#x: %w", virtq.ErrBadConfig, cfg.Desc, err)
	}
	avail, err := cfg.Mem.TranslateUser(cfg.Driver, availLen(size), 2)
	if err != nil {
		return nil, fmt.Errorf("%w: avail ring at %#x: %w", virtq.ErrBadConfig, cfg.Driver, err)
	}
	if !guestmem.Aligned(avail, availAlign) {
		return nil, fmt.Errorf("%w: avail ring at %#x is not 4-byte aligned (%w)", virtq.ErrBadConfig, cfg.Driver, guestmem.ErrMisaligned)
	}
	used, err := cfg.Mem.TranslateUser(cfg.Device, usedLen(size), usedAlign)
	if err != nil {
		return nil, fmt.Errorf("%w: used ring at %#x: %w", virtq.ErrBadConfig, cfg.Device, err)
	}
	r := &Ring{
		writeMask: descFWrite,
		hint:      cfg.Mem.NewHint(),
		mem:       cfg.Mem,
		desc:      desc,
		avail:     avail,
		used:      used,
		size:      uint32(size),
		mask:      uint16(size - 1),
		eventIdx:  virtq.Has(cfg.Features, virtq.FeatureEventIdx),
		indirect:  virtq.Has(cfg.Features, virtq.FeatureIndirectDesc),
		lastAvail: uint16(cfg.Base),
		inFlight:  make([]bool, size),
		writeLen:  make([]uint32, size),
		stamps:    virtq.NewFillStamps(size),
		streaming: guestmem.NewStreamChoice(),
	}
	if cfg.ReadOnly {
		r.writeMask = 0
	}
	if cfg.Mem.Log() != nil {
		r.dirty = cfg.Mem
	}
	w := guestmem.LoadAcquire32(used, 0)
	r.usedFlags = uint16(w) & usedFNoNotify
	r.usedIdx = uint16(w >> 16)
	r.signalledUsed = r.usedIdx
	if uint32(r.lastAvail-r.usedIdx) > r.size {
		return nil, fmt.Errorf("%w: used idx %d is more than the ring size behind base %d", virtq.ErrBadConfig, r.usedIdx, r.lastAvail)
	}
	return r, nil
}

// State returns the next avail index to read, as GET_VRING_BASE carries it
// for a split ring.
func (r *Ring) State() uint32 { return uint32(r.lastAvail) }

// InFlight is how many popped chains are not yet pushed.
func (r *Ring) InFlight() int { return r.nInFlight }

// Err returns the error that broke the ring, or nil.
func (r *Ring) Err() error { return r.err }

// fail breaks the ring with err, which wraps one of virtq's sentinels; the
// returned error wraps virtq.ErrBroken too.
func (r *Ring) fail(err error) error {
	r.err = fmt.Errorf("split: %w: %w", virtq.ErrBroken, err)
	return r.err
}

// Size is the ring's number of descriptors.
func (r *Ring) Size() int { return int(r.size) }
