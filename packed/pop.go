package packed

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/xvswitch/xvswitch/guestmem"
	"github.com/xvswitch/xvswitch/virtq"
)

// errBurstFull stops a burst at a chain whose segments did not fit; the
// chain stays available and is popped first next time. It never leaves Pop.
var errBurstFull = errors.New("packed: burst full")

// Pop resets b and fills it with up to max (at most virtq.MaxBurst) chains
// the driver made available, their buffers translated to host bytes. It
// returns how many it popped. An error means the guest broke the ring: then
// nothing is popped (b is empty, the ring state is as before the call) and
// the ring is broken from then on.
func (r *Ring) Pop(b *virtq.Burst, max int) (int, error) {
	b.Reset()
	if r.broken {
		return 0, virtq.ErrBroken
	}
	if max > virtq.MaxBurst {
		max = virtq.MaxBurst
	}
	startIdx, startWrap := r.availIdx, r.availWrap
	// An empty ring costs the load of the one line the driver writes
	// next, as in DPDK's vhost, not a touch of every line a burst may
	// read: the driver is writing those lines, each load takes a copy,
	// and each copy is one more transfer for the driver's next store to
	// it, so a device polling an empty ring that way slows down the
	// guest that fills it (what sets the rate of a guest's transmit
	// queue when the switch is the faster side).
	if _, _, ok := r.head(); !ok {
		return 0, nil
	}
	r.touchAhead(max)
	for b.N < max && !b.Full() {
		if r.availIdx%batch == 0 && b.N+batch <= max {
			// Aligned groups of single descriptors (batch.go); the
			// chain that stopped them, if any, goes the general way
			// below rather than being tried as a group again.
			r.popGroups(b, max)
			if b.N == max || b.Full() {
				break
			}
		}
		off, w, ok := r.head()
		if !ok {
			break
		}
		if uint16(w>>16)&(flagNext|flagIndirect) == 0 && r.popOne(b, off, w) {
			continue
		}
		err := r.popChain(b, w)
		if err == nil {
			continue
		}
		if err == errBurstFull {
			if b.N > 0 {
				break
			}
			err = fmt.Errorf("%w: its buffers need more than %d segments", virtq.ErrChainTooLong, virtq.MaxBurstSegs)
		}
		err = fmt.Errorf("packed: chain at descriptor %d (wrap %t): %w", r.availIdx, r.availWrap, err)
		r.unpop(b, startIdx, startWrap)
		return 0, r.fail(err)
	}
	return b.N, nil
}

// head returns the byte offset and the id|flags word of the descriptor
// at the ring's position, and whether the driver made it available in
// the current wrap. The acquire load of id|flags is what makes the rest of
// the descriptor (and the chain behind it) visible: the driver writes the
// head's flags last, with a barrier before.
func (r *Ring) head() (off int, w uint32, ok bool) {
	off = int(r.availIdx) * descSize
	w = guestmem.LoadAcquire32(r.desc, off+offIDFlags)
	return off, w, uint16(w>>16)&(flagAvail|flagUsed) == r.availBits
}

// unpop forgets the chains of a failed burst, so that the ring state is
// what it was before it.
func (r *Ring) unpop(b *virtq.Burst, idx uint16, wrap bool) {
	for i := 0; i < b.N; i++ {
		c := &b.Chains[i]
		r.inflight[c.ID].descs = 0
		r.slotsInFlight -= uint32(c.Descs)
	}
	r.nInFlight -= b.N
	r.setAvail(idx, wrap)
	b.Reset()
}

// popOne is the fast path for a chain of one direct descriptor, the common
// case (every frame of a guest that uses neither chaining nor indirect
// tables). It pops the chain and reports true when everything about it is
// in order; otherwise it does nothing and popChain, which checks every case
// and says what is wrong, takes over.
func (r *Ring) popOne(b *virtq.Burst, off int, w uint32) bool {
	d := r.desc[off : off+descSize]
	id := uint16(w)
	ln := binary.LittleEndian.Uint32(d[offLen:])
	if id >= r.size || ln == 0 || r.slotsInFlight >= uint32(r.size) {
		return false
	}
	f := &r.inflight[id]
	if f.descs != 0 {
		return false
	}
	c := b.BeginChain()
	if !r.translate1(b, c, binary.LittleEndian.Uint64(d[offAddr:]), ln, uint16(w>>16)&r.writeMask != 0) {
		b.AbortChain(c)
		return false
	}
	c.ID, c.Descs = id, 1
	b.CommitChain()
	f.descs, f.writeLen = 1, c.WriteLen
	if r.inOrder {
		r.recordOrder(0, id)
	}
	r.nInFlight++
	r.slotsInFlight++
	if r.availIdx++; r.availIdx == r.size {
		r.setAvail(0, !r.availWrap)
	}
	return true
}

// popChain pops a chain of several descriptors (NEXT) or one indirect
// descriptor. w is the head's id|flags word, already read.
func (r *Ring) popChain(b *virtq.Burst, w uint32) error {
	c := b.BeginChain()
	idx := r.availIdx
	slots := uint16(0)
	for {
		flags := uint16(w >> 16)
		d := r.desc[int(idx)*descSize : int(idx)*descSize+descSize]
		addr := binary.LittleEndian.Uint64(d[offAddr:])
		ln := binary.LittleEndian.Uint32(d[offLen:])
		slots++
		if flags&flagIndirect != 0 {
			// In a packed ring an indirect descriptor is a whole chain:
			// the spec forbids mixing it with NEXT.
			var err error
			if slots != 1 || flags&flagNext != 0 {
				err = fmt.Errorf("%w: indirect descriptor %d is part of a NEXT chain", virtq.ErrBadIndirect, idx)
			} else {
				err = r.addIndirect(b, c, addr, ln)
			}
			if err != nil {
				b.AbortChain(c)
				return err
			}
			break
		}
		if int(slots) > virtq.MaxChainDescs {
			b.AbortChain(c)
			return fmt.Errorf("%w: more than %d descriptors", virtq.ErrChainTooLong, virtq.MaxChainDescs)
		}
		if err := r.addBuf(b, c, addr, ln, flags&r.writeMask != 0); err != nil {
			b.AbortChain(c)
			return err
		}
		if flags&flagNext == 0 {
			break
		}
		if slots == r.size {
			// The next descriptor would be the head again.
			b.AbortChain(c)
			return fmt.Errorf("%w: %w: NEXT runs around the whole ring of %d", virtq.ErrChainTooLong, virtq.ErrLoop, r.size)
		}
		if idx++; idx == r.size {
			idx = 0
		}
		// Read once: flags and the buffer id (which the spec puts in the
		// last descriptor of a chain) come from the same load.
		w = guestmem.LoadAcquire32(r.desc, int(idx)*descSize+offIDFlags)
	}
	id := uint16(w)
	if err := r.checkID(id); err != nil {
		b.AbortChain(c)
		return err
	}
	return r.commit(b, c, id, slots)
}

// addBuf translates one buffer of chain c into b's segments. A buffer of
// length 0 makes the chain Malformed; the buffers of a malformed chain are
// not translated (it is dropped whole), its descriptors still walked.
func (r *Ring) addBuf(b *virtq.Burst, c *virtq.Chain, addr uint64, ln uint32, write bool) error {
	if ln == 0 {
		b.MarkMalformed(c)
		return nil
	}
	if uint64(ln) > r.maxLen {
		return fmt.Errorf("%w: %d bytes at %#x", virtq.ErrBadLength, ln, addr)
	}
	if c.Malformed {
		return nil
	}
	total := c.ReadLen
	if write {
		total = c.WriteLen
	} else if c.WriteLen != 0 {
		// Lengths are nonzero, so WriteLen != 0 means a writable buffer
		// came before this readable one.
		return fmt.Errorf("%w: buffer at %#x", virtq.ErrWriteBeforeRead, addr)
	}
	if uint64(total)+uint64(ln) > math.MaxUint32 {
		return fmt.Errorf("%w: chain totals more than 4 GiB", virtq.ErrBadLength)
	}
	if r.translate1(b, c, addr, ln, write) {
		return nil
	}
	segs, err := r.mem.AppendSegments(b.SegTail()[:0], addr, uint64(ln))
	if err != nil {
		if errors.Is(err, guestmem.ErrTooManySegments) {
			return errBurstFull
		}
		return fmt.Errorf("%w: %d bytes at %#x", virtq.ErrBadAddress, ln, addr)
	}
	b.AddSegs(c, len(segs), ln, write)
	return nil
}

// checkID refuses a buffer id the device could not return unambiguously.
func (r *Ring) checkID(id uint16) error {
	if id >= r.size {
		return fmt.Errorf("%w: id %d (ring size %d)", virtq.ErrBadID, id, r.size)
	}
	if r.inflight[id].descs != 0 {
		return fmt.Errorf("%w: id %d is already in flight", virtq.ErrBadID, id)
	}
	return nil
}

// commit makes chain c, which took slots ring slots, part of the burst and
// records buffer id as in flight.
func (r *Ring) commit(b *virtq.Burst, c *virtq.Chain, id, slots uint16) error {
	// The driver may only reuse slots we have returned as used: a chain
	// that needs more than the free ones overran the ring, and would have
	// our used writes overtake descriptors we have not read.
	if r.slotsInFlight+uint32(slots) > uint32(r.size) {
		b.AbortChain(c)
		return fmt.Errorf("%w: chain of %d slots with %d of %d in flight", virtq.ErrBadIndex, slots, r.slotsInFlight, r.size)
	}
	c.ID, c.Descs = id, slots
	b.CommitChain()
	wl := c.WriteLen
	if c.Malformed {
		// Its writable bytes as the driver counts them are unknown, so
		// an IN_ORDER push must not fold it into a run (whose skipped
		// buffers the driver takes as completely written): it gets a
		// used descriptor of its own.
		wl = math.MaxUint32
	}
	r.inflight[id] = inflightBuf{descs: slots, writeLen: wl}
	if r.inOrder {
		r.recordOrder(0, id)
	}
	r.nInFlight++
	r.slotsInFlight += uint32(slots)
	r.setAvail(r.advance(r.availIdx, r.availWrap, slots))
	return nil
}
