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
	// An IN_ORDER push marks nearly every slot of a burst here: the
	// slots up to the ring's end, then the rest from its start with the
	// next lap's flags, each stretch a loop of plain stores (Push's
	// release store of the first used descriptor publishes them).
	desc, size := r.desc, int(r.size)
	from, left := int(idx)+1, int(n)-1
	bits := usedBits(wrap)
	for left > 0 {
		if from == size {
			from, bits = 0, usedBits(!wrap)
		}
		k := min(left, size-from)
		run := desc[from*descSize : (from+k)*descSize]
		for o := offIDFlags + 2; o < len(run); o += descSize {
			binary.LittleEndian.PutUint16(run[o:], bits)
		}
		from, left = from+k, left-k
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
// Few values are carried from one entry to the next (the slots of the run
// are what was retired since the last used descriptor written), so the
// loop keeps them in registers.
func (r *Ring) pushInOrder(used []virtq.Used, p *publisher) error {
	inflight, order := r.inflight, r.order
	head := r.orderHead
	// Only as many entries as chains in flight can be the oldest.
	m := min(len(used), r.nInFlight)
	var retired, written uint32 // slots retired, and covered by used descriptors written
	var lastID uint16
	var lastLen uint32
	var err error
	i := 0
	for ; i < m; i++ {
		u := &used[i]
		if order[head] != u.ID {
			break
		}
		if head++; head == len(order) {
			head = 0
		}
		// The order queue holds only ids in flight, so u.ID < size.
		f := &inflight[u.ID]
		wl := f.writeLen
		retired += uint32(f.descs)
		f.descs = 0
		lastID, lastLen = u.ID, min(u.Len, wl)
		if i+1 < len(used) && lastLen == wl {
			continue // the driver takes a skipped buffer as completely used
		}
		// A run stays <= size slots: in-flight chains never take more.
		r.write(p, lastID, lastLen, uint16(retired-written))
		written = retired
	}
	if i < len(used) {
		err = fmt.Errorf("%w: id %d is not the oldest in flight (IN_ORDER)", virtq.ErrUsedNotInFlight, used[i].ID)
	}
	if retired != written {
		// Complete what was retired before the bad entry.
		r.write(p, lastID, lastLen, uint16(retired-written))
	}
	r.orderHead = head
	r.nInFlight -= i
	r.slotsInFlight -= retired
	return err
}
