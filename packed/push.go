package packed

import (
	"encoding/binary"
	"fmt"

	"github.com/xvswitch/xvswitch/guestmem"
	"github.com/xvswitch/xvswitch/virtq"
)

// Push returns chains to the driver as used, in the order given. Each entry
// names a buffer id popped and not yet pushed. Len is clamped to the
// chain's WriteLen, so that a bug in the switch can never tell a guest that
// more was written than its buffer holds. The used index advances by the
// slots the chain took when it was popped (the ring's own record;
// Used.Descs is not trusted).
//
// Without IN_ORDER, each entry gets its own used descriptor. With IN_ORDER,
// entries must come in the order their chains were popped, and a run of
// them costs one used descriptor carrying the last id: the driver takes
// the skipped buffers as completely used, so a run only continues past an
// entry whose Len is its chain's whole WriteLen (always true for transmit
// chains, which have no writable part).
//
// Publication: every used descriptor but the first is written with plain
// stores, then the first one's id|flags with a release store. The driver
// polls only the next used slot, so it sees the batch, complete, when it
// sees the first one (as DPDK's vhost does; one barrier per burst).
//
// The slots a used descriptor covers beyond its own (the rest of a chain,
// the rest of an IN_ORDER run) get used flags too, before the release:
// drivers skip them without reading, and a device that takes over after
// this one died finds where it stopped from the flags alone (resume.go).
func (r *Ring) Push(used []virtq.Used) error {
	if r.broken {
		return virtq.ErrBroken
	}
	p := publisher{first: -1}
	from, pushed := r.usedIdx, r.sincePushed
	var err error
	if r.inOrder {
		err = r.pushInOrder(used, &p)
	} else {
		err = r.pushAny(used, &p)
	}
	if p.first >= 0 {
		guestmem.StoreRelease32(r.desc, p.first+offIDFlags, p.firstWord)
	}
	if r.dirty != nil {
		r.logSlots(from, r.sincePushed-pushed)
	}
	if err != nil {
		return r.fail(fmt.Errorf("packed: push: %w", err))
	}
	return nil
}

// publisher holds back the first used descriptor's flags of a Push.
type publisher struct {
	first     int // byte offset of the first used descriptor, or -1
	firstWord uint32
}

// write writes a used descriptor for buffer id at the current used slot,
// then advances the used index by slots.
func (r *Ring) write(p *publisher, id uint16, ln uint32, slots uint16) {
	off := int(r.usedIdx) * descSize
	d := r.desc[off : off+descSize]
	flags := usedBits(r.usedWrap)
	if ln != 0 {
		// In a used descriptor WRITE says the device wrote data.
		flags |= flagWrite
	}
	word := uint32(id) | uint32(flags)<<16
	binary.LittleEndian.PutUint32(d[offLen:], ln)
	if p.first < 0 {
		p.first, p.firstWord = off, word
	} else {
		binary.LittleEndian.PutUint32(d[offIDFlags:], word)
	}
	if slots > 1 {
		r.markSkipped(r.usedIdx, r.usedWrap, slots)
	}
	r.usedIdx, r.usedWrap = r.advance(r.usedIdx, r.usedWrap, slots)
	r.sincePushed += uint32(slots)
}

// markSkipped gives used flags to the n-1 slots after idx that a used
// descriptor written at idx (wrap counter wrap) covers, each with the wrap
// counter of its own lap. Only their flags change: a driver never reads
// them, and it overwrites them whole when it reuses them.
func (r *Ring) markSkipped(idx uint16, wrap bool, n uint16) {
	// Ring, size and the flags of the lap in locals: an IN_ORDER push
	// marks nearly every slot of a burst here.
	desc, size, bits := r.desc, r.size, usedBits(wrap)
	for k := uint16(1); k < n; k++ {
		if idx++; idx == size {
			idx, wrap = 0, !wrap
			bits = usedBits(wrap)
		}
		// Plain store: Push's release store of the first used
		// descriptor publishes it.
		guestmem.Store16(desc, int(idx)*descSize+offIDFlags+2, bits)
	}
}

// pushAny writes a used descriptor per entry. It is the hot path of a
// guest without IN_ORDER, so it keeps the ring position and the flags word
// in locals and writes them back once.
func (r *Ring) pushAny(used []virtq.Used, p *publisher) error {
	idx, wrap := r.usedIdx, r.usedWrap
	bits := uint32(usedBits(wrap)) << 16
	desc, inflight, size := r.desc, r.inflight, r.size
	var err error
	var slots uint32
	n := 0
	for i := 0; i < len(used); i++ {
		if idx%batch == 0 && i+batch <= len(used) {
			// Groups of four single-slot chains (batch.go); the entry
			// that stopped them, if any, goes entry by entry below.
			var k int
			if k, idx, wrap = r.pushGroups(used[i:], idx, wrap, p); k != 0 {
				bits = uint32(usedBits(wrap)) << 16
				slots += uint32(k)
				n += k
				if i += k; i == len(used) {
					break
				}
			}
		}
		u := &used[i]
		if int(u.ID) >= len(inflight) || inflight[u.ID].descs == 0 {
			err = fmt.Errorf("%w: id %d", virtq.ErrUsedNotInFlight, u.ID)
			break
		}
		f := &inflight[u.ID]
		descs, ln := f.descs, min(u.Len, f.writeLen)
		f.descs = 0
		off := int(idx) * descSize
		d := desc[off : off+descSize]
		word := uint32(u.ID) | bits
		if ln != 0 {
			// In a used descriptor WRITE says the device wrote data.
			word |= flagWrite << 16
		}
		binary.LittleEndian.PutUint32(d[offLen:], ln)
		if p.first < 0 {
			p.first, p.firstWord = off, word
		} else {
			binary.LittleEndian.PutUint32(d[offIDFlags:], word)
		}
		if descs > 1 {
			r.markSkipped(idx, wrap, descs)
		}
		if idx += descs; idx >= size {
			idx -= size
			wrap = !wrap
			bits = uint32(usedBits(wrap)) << 16
		}
		slots += uint32(descs)
		n++
	}
	r.usedIdx, r.usedWrap = idx, wrap
	r.nInFlight -= n
	r.slotsInFlight -= slots
	r.sincePushed += slots
	return err
}

// pushInOrder writes one used descriptor per run of entries (see Push).
func (r *Ring) pushInOrder(used []virtq.Used, p *publisher) error {
	inflight, order := r.inflight, r.order
	head, avail := r.orderHead, r.nInFlight
	var err error
	var run uint16 // slots retired since the last used descriptor written
	var retired uint32
	var lastID uint16
	var lastLen uint32
	n := 0
	for i := range used {
		u := &used[i]
		if n == avail || order[head] != u.ID {
			err = fmt.Errorf("%w: id %d is not the oldest in flight (IN_ORDER)", virtq.ErrUsedNotInFlight, u.ID)
			break
		}
		if head++; head == len(order) {
			head = 0
		}
		n++
		// The order queue holds only ids in flight, so u.ID < size.
		f := &inflight[u.ID]
		descs, wl := f.descs, f.writeLen
		f.descs = 0
		retired += uint32(descs)
		run += descs // stays <= size: in-flight chains never take more slots
		lastID, lastLen = u.ID, min(u.Len, wl)
		if i+1 < len(used) && lastLen == wl {
			continue // the driver takes a skipped buffer as completely used
		}
		r.write(p, lastID, lastLen, run)
		run = 0
	}
	if run != 0 {
		// Complete what was retired before the bad entry.
		r.write(p, lastID, lastLen, run)
	}
	r.orderHead = head
	r.nInFlight -= n
	r.slotsInFlight -= retired
	return err
}
