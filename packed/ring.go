package packed

import (
	"fmt"

	"github.com/xvswitch/xvswitch/guestmem"
	"github.com/xvswitch/xvswitch/virtq"
)

// Ring is the device side of one packed virtqueue. It implements virtq.Ring;
// like every ring it belongs to one goroutine at a time.
type Ring struct {
	mem *guestmem.Memory
	// dirty is mem while its writes are logged (live migration), else
	// nil: the one check the write paths make (dirtylog.go).
	dirty *guestmem.Memory
	hint  guestmem.Hint // region of the last buffer translated (translate.go)
	desc  []byte        // size descriptors, 16-byte aligned
	drv   []byte        // driver event suppression: read by us
	dev   []byte        // device event suppression: written by us
	// writeMask is flagWrite, or 0 on a ReadOnly ring (virtq.Config).
	writeMask uint16
	size      uint16

	indirect bool // INDIRECT_DESC negotiated
	eventIdx bool // EVENT_IDX negotiated
	inOrder  bool // IN_ORDER negotiated
	// maxLen is the guest's total memory: a descriptor longer than that
	// cannot describe guest bytes, whatever its address.
	maxLen uint64

	// Next descriptor to read and the driver wrap counter it must carry.
	availIdx  uint16
	availWrap bool
	availBits uint16 // availBits(availWrap), what Pop compares flags with
	// Next descriptor to overwrite with a used one, and our wrap counter.
	usedIdx  uint16
	usedWrap bool

	// inflight is indexed by buffer id. It is sized at New, so tracking
	// costs no allocation, and it is what lets us refuse an id the driver
	// reuses before we returned it.
	inflight  []inflightBuf
	nInFlight int
	// slotsInFlight is how many ring slots the in-flight chains took.
	slotsInFlight uint32
	// order holds in-flight ids in the order they were popped, only when
	// IN_ORDER is negotiated: the driver then relies on used order being
	// avail order, so Push checks it.
	order     []uint16
	orderHead int

	// Notifications: used slots written or skipped since the last
	// NeedNotify, and whether one has run since New (after a restore we do
	// not know what the previous ring signalled, so the first one is
	// conservative).
	sincePushed uint32
	checked     bool
	kicks       uint32 // what we last wrote to the device area
	fence       uint32

	broken bool
	// touched keeps touchAhead's loads from being optimised away.
	touched uint16
	// stamps catch an id given twice in one Fill (fill.go).
	stamps virtq.FillStamps
	// streaming chooses how Fill writes short frames (fillcopy.go).
	streaming guestmem.StreamChoice
}

type inflightBuf struct {
	descs    uint16 // ring slots the chain took; 0 when not in flight
	writeLen uint32 // its writable bytes: used lengths are clamped to it, and IN_ORDER runs need it (MaxUint32: unknown, a malformed chain)
}

const kicksUnknown = ^uint32(0)

var _ virtq.Ring = (*Ring)(nil)

// New validates cfg and returns a ring over its memory. cfg.Size may be any
// value from 1 to 32768; cfg.Base is the state from SET_VRING_BASE
// (InitialState for a fresh ring).
func New(cfg virtq.Config) (*Ring, error) {
	if cfg.Mem == nil {
		return nil, fmt.Errorf("%w: packed: no guest memory", virtq.ErrBadConfig)
	}
	if cfg.Size == 0 || cfg.Size > maxRingSize {
		return nil, fmt.Errorf("%w: packed: size %d not in 1..%d", virtq.ErrBadConfig, cfg.Size, maxRingSize)
	}
	size := uint64(cfg.Size)
	desc, err := cfg.Mem.TranslateUser(cfg.Desc, size*descSize, descSize)
	if err != nil {
		return nil, fmt.Errorf("%w: packed: descriptor ring at %#x: %w", virtq.ErrBadConfig, cfg.Desc, err)
	}
	drv, err := cfg.Mem.TranslateUser(cfg.Driver, eventSize, eventSize)
	if err != nil {
		return nil, fmt.Errorf("%w: packed: driver event area at %#x: %w", virtq.ErrBadConfig, cfg.Driver, err)
	}
	dev, err := cfg.Mem.TranslateUser(cfg.Device, eventSize, eventSize)
	if err != nil {
		return nil, fmt.Errorf("%w: packed: device event area at %#x: %w", virtq.ErrBadConfig, cfg.Device, err)
	}
	availIdx, usedIdx := uint16(cfg.Base&0x7fff), uint16(cfg.Base>>16&0x7fff)
	if availIdx >= cfg.Size || usedIdx >= cfg.Size {
		return nil, fmt.Errorf("%w: packed: base %#x has an index beyond size %d", virtq.ErrBadConfig, cfg.Base, cfg.Size)
	}
	r := &Ring{
		writeMask: flagWrite,
		mem:       cfg.Mem,
		desc:      desc,
		drv:       drv,
		dev:       dev,
		size:      cfg.Size,
		indirect:  virtq.Has(cfg.Features, virtq.FeatureIndirectDesc),
		eventIdx:  virtq.Has(cfg.Features, virtq.FeatureEventIdx),
		inOrder:   virtq.Has(cfg.Features, virtq.FeatureInOrder),
		usedIdx:   usedIdx,
		usedWrap:  cfg.Base&(wrapBit<<16) != 0,
		inflight:  make([]inflightBuf, cfg.Size),
		stamps:    virtq.NewFillStamps(int(cfg.Size)),
		streaming: guestmem.NewStreamChoice(),
		kicks:     kicksUnknown,
	}
	if cfg.ReadOnly {
		r.writeMask = 0
	}
	if cfg.Mem.Log() != nil {
		r.dirty = cfg.Mem
	}
	r.setAvail(availIdx, cfg.Base&wrapBit != 0)
	r.hint = cfg.Mem.NewHint()
	for _, reg := range cfg.Mem.Regions() {
		r.maxLen += reg.Size
	}
	if r.inOrder {
		r.order = make([]uint16, cfg.Size)
	}
	return r, nil
}

// State returns the ring state as GET_VRING_BASE carries it: bits 0-14 the
// next avail index, bit 15 its wrap counter, bits 16-30 the next used index,
// bit 31 its wrap counter. Buffers still in flight are not part of it.
func (r *Ring) State() uint32 {
	s := uint32(r.availIdx) | uint32(r.usedIdx)<<16
	if r.availWrap {
		s |= wrapBit
	}
	if r.usedWrap {
		s |= wrapBit << 16
	}
	return s
}

// InFlight is how many popped chains are not yet pushed.
func (r *Ring) InFlight() int { return r.nInFlight }

// Size is the number of descriptors in the ring.
func (r *Ring) Size() int { return int(r.size) }

// advance moves a ring position forward by n slots (n <= size), flipping
// the wrap counter when it passes the end.
func (r *Ring) advance(idx uint16, wrap bool, n uint16) (uint16, bool) {
	i := uint32(idx) + uint32(n)
	if i >= uint32(r.size) {
		i -= uint32(r.size)
		wrap = !wrap
	}
	return uint16(i), wrap
}

// setAvail sets the next descriptor to read and its driver wrap counter.
func (r *Ring) setAvail(idx uint16, wrap bool) {
	r.availIdx, r.availWrap, r.availBits = idx, wrap, availBits(wrap)
}

// fail marks the ring broken: a guest that broke the contract once is not
// trusted again.
func (r *Ring) fail(err error) error {
	r.broken = true
	return err
}
