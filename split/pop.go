package split

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/xvswitch/xvswitch/guestmem"
	"github.com/xvswitch/xvswitch/virtq"
)

// errNoRoom means a chain's segments did not fit in what is left of the
// burst. It never leaves the package: Pop stops the burst before that chain
// (or, for a burst's first chain, fails with virtq.ErrChainTooLong).
var errNoRoom = errors.New("split: burst out of segments")

// Pop resets b, fills it with up to max available chains and returns how
// many it popped. On error nothing is popped (b is empty, the avail index
// does not move) and the ring is broken.
func (r *Ring) Pop(b *virtq.Burst, max int) (int, error) {
	b.Reset()
	if r.err != nil {
		return 0, r.err
	}
	if max > virtq.MaxBurst {
		max = virtq.MaxBurst
	}
	// flags|idx in one 32-bit acquire load: every avail entry and
	// descriptor the driver wrote before publishing idx is visible to the
	// plain loads below. Read once per burst.
	idx := uint16(guestmem.LoadAcquire32(r.avail, 0) >> 16)
	ready := idx - r.lastAvail
	if uint32(ready) > r.size {
		return 0, r.fail(fmt.Errorf("%w: avail idx %d is %d ahead of the device's %d (ring size %d)",
			virtq.ErrBadIndex, idx, ready, r.lastAvail, r.size))
	}
	if int(ready) < max {
		max = int(ready)
	}
	r.touchAhead(max)
	for b.N < max && !b.Full() {
		at := r.lastAvail + uint16(b.N)
		slot := int(at & r.mask)
		var head uint16
		if n := b.N; n+availGroup <= max && slot+availGroup <= int(r.size) && b.SegsLeft() >= availGroup {
			// Four avail entries in one load (fast.go). The acquire
			// load of idx above ordered them.
			heads := binary.LittleEndian.Uint64(r.avail[4+2*slot:])
			if r.popOne(b, uint16(heads)) && r.popOne(b, uint16(heads>>16)) &&
				r.popOne(b, uint16(heads>>32)) && r.popOne(b, uint16(heads>>48)) {
				continue
			}
			if b.N != n {
				continue // the entry that stopped the group is read again
			}
			head = uint16(heads)
		} else {
			head = guestmem.Load16(r.avail, 4+2*slot)
			if r.popOne(b, head) {
				continue
			}
		}
		err := r.popChain(b, head)
		if err == errNoRoom {
			if b.N == 0 {
				return 0, r.fail(fmt.Errorf("%w: chain at head %d needs more than %d segments",
					virtq.ErrChainTooLong, head, virtq.MaxBurstSegs))
			}
			break // popped again next burst, with a fresh segment array
		}
		if err != nil {
			for i := 0; i < b.N; i++ {
				r.inFlight[b.Chains[i].ID] = false
			}
			b.Reset()
			return 0, r.fail(fmt.Errorf("avail index %d, head %d: %w", at, head, err))
		}
	}
	r.lastAvail += uint16(b.N)
	r.nInFlight += b.N
	return b.N, nil
}

// chainState is what a chain walk carries from one descriptor to the next.
type chainState struct {
	c       *virtq.Chain
	total   int  // descriptors so far, direct and indirect
	writing bool // a writable descriptor has been seen
}

// popChain walks the chain starting at descriptor head into chain b.N and
// commits it. Each descriptor is read once into locals (two 64-bit loads),
// so a guest rewriting it concurrently cannot make a checked value differ
// from a used one.
func (r *Ring) popChain(b *virtq.Burst, head uint16) error {
	if uint32(head) >= r.size {
		return fmt.Errorf("%w: head %d, ring size %d", virtq.ErrBadID, head, r.size)
	}
	if r.inFlight[head] {
		return fmt.Errorf("%w: head %d is already in flight", virtq.ErrBadID, head)
	}
	st := chainState{c: b.BeginChain()}
	st.c.ID = head
	i := head
	for steps := uint32(1); ; steps++ {
		// Indices are < size, so a chain that visits more descriptors
		// than the ring holds must have visited one twice.
		if steps > r.size {
			b.AbortChain(st.c)
			return fmt.Errorf("%w: chain visits more than %d descriptors", virtq.ErrLoop, r.size)
		}
		off := int(i) * descSize
		d := r.desc[off : off+descSize]
		addr := binary.LittleEndian.Uint64(d)
		hi := binary.LittleEndian.Uint64(d[8:])
		length, flags, next := uint32(hi), uint16(hi>>32), uint16(hi>>48)

		var err error
		if flags&descFIndirect != 0 {
			if flags&descFNext != 0 {
				err = fmt.Errorf("%w: both INDIRECT and NEXT", virtq.ErrBadIndirect)
			} else {
				err = r.walkIndirect(b, &st, addr, length)
			}
			flags = 0 // an indirect descriptor ends the chain
		} else {
			err = r.addBuf(b, &st, addr, length, flags&r.writeMask != 0)
		}
		if err == nil && flags&descFNext != 0 && uint32(next) >= r.size {
			err = fmt.Errorf("%w: next %d, ring size %d", virtq.ErrBadID, next, r.size)
		}
		if err != nil {
			b.AbortChain(st.c)
			if err != errNoRoom {
				err = fmt.Errorf("descriptor %d: %w", i, err)
			}
			return err
		}
		if flags&descFNext == 0 {
			st.c.Descs = uint16(steps)
			break
		}
		i = next
	}
	wl := st.c.WriteLen
	b.CommitChain()
	r.inFlight[head] = true
	r.writeLen[head] = wl
	return nil
}

// walkIndirect adds the chain of an indirect table at guest address addr,
// length bytes. The table is translated once when it lies in one region;
// otherwise each entry is read on its own (readIndirect).
func (r *Ring) walkIndirect(b *virtq.Burst, st *chainState, addr uint64, length uint32) error {
	if !r.indirect {
		return fmt.Errorf("%w: INDIRECT_DESC was not negotiated", virtq.ErrBadIndirect)
	}
	if length == 0 || length%descSize != 0 {
		return fmt.Errorf("%w: table length %d is not a nonzero multiple of %d", virtq.ErrBadIndirect, length, descSize)
	}
	if addr+uint64(length) < addr {
		return fmt.Errorf("%w: indirect table %#x+%d wraps", virtq.ErrBadAddress, addr, length)
	}
	n := length / descSize
	table, err := r.mem.Translate(addr, uint64(length))
	if err != nil {
		table = nil
	}
	j := uint32(0)
	for steps := uint32(1); ; steps++ {
		if steps > n {
			return fmt.Errorf("%w: indirect chain visits more than its %d entries", virtq.ErrLoop, n)
		}
		var lo, hi uint64
		if table != nil {
			e := table[j*descSize : j*descSize+descSize]
			lo, hi = binary.LittleEndian.Uint64(e), binary.LittleEndian.Uint64(e[8:])
		} else if lo, hi, err = r.readIndirect(addr + uint64(j)*descSize); err != nil {
			return fmt.Errorf("%w: indirect entry %d at %#x", virtq.ErrBadAddress, j, addr+uint64(j)*descSize)
		}
		length, flags, next := uint32(hi), uint16(hi>>32), uint16(hi>>48)
		if flags&descFIndirect != 0 {
			return fmt.Errorf("%w: indirect entry %d", virtq.ErrNestedIndirect, j)
		}
		if err := r.addBuf(b, st, lo, length, flags&r.writeMask != 0); err != nil {
			if err != errNoRoom {
				err = fmt.Errorf("indirect entry %d: %w", j, err)
			}
			return err
		}
		if flags&descFNext == 0 {
			return nil
		}
		if uint32(next) >= n {
			return fmt.Errorf("%w: indirect entry %d: next %d, table has %d", virtq.ErrBadIndirect, j, next, n)
		}
		j = uint32(next)
	}
}

// readIndirect reads the 16-byte descriptor at guest address gpa when it may
// straddle regions: a table that crosses from one region into an adjacent
// one is legal, just rare.
func (r *Ring) readIndirect(gpa uint64) (lo, hi uint64, err error) {
	segs, err := r.mem.AppendSegments(r.straddle[:0], gpa, descSize)
	if err != nil {
		return 0, 0, err
	}
	var buf [descSize]byte
	k := 0
	for _, s := range segs {
		k += copy(buf[k:], s)
	}
	return binary.LittleEndian.Uint64(buf[:]), binary.LittleEndian.Uint64(buf[8:]), nil
}

// addBuf adds one buffer descriptor to the chain: checks the device's
// bounds and the driver's ordering, then translates it into the burst's
// segment array without allocating.
func (r *Ring) addBuf(b *virtq.Burst, st *chainState, addr uint64, length uint32, write bool) error {
	st.total++
	if st.total > virtq.MaxChainDescs {
		return fmt.Errorf("%w: more than %d descriptors", virtq.ErrChainTooLong, virtq.MaxChainDescs)
	}
	c := st.c
	// A buffer of length 0 makes the chain Malformed: it is dropped
	// whole, so neither it nor the chain's other buffers are translated;
	// the walk goes on to find the chain's end.
	if length == 0 {
		b.MarkMalformed(c)
	}
	if c.Malformed {
		return nil
	}
	if write {
		st.writing = true
		if c.WriteLen+length < length {
			return fmt.Errorf("%w: writable bytes exceed 4 GiB", virtq.ErrBadLength)
		}
	} else {
		if st.writing {
			return fmt.Errorf("%w: readable buffer at %#x", virtq.ErrWriteBeforeRead, addr)
		}
		if c.ReadLen+length < length {
			return fmt.Errorf("%w: readable bytes exceed 4 GiB", virtq.ErrBadLength)
		}
	}
	// The common case: the buffer lies in one region, usually the
	// previous buffer's (guestmem.Hint).
	if tail := b.SegTail(); len(tail) > 0 {
		if host, ok := r.hint.Translate(addr, uint64(length)); ok {
			tail[0] = host
			b.AddSegs(c, 1, length, write)
			return nil
		}
	}
	segs, err := r.mem.AppendSegments(b.SegTail()[:0], addr, uint64(length))
	if err != nil {
		if err == guestmem.ErrTooManySegments {
			return errNoRoom
		}
		return fmt.Errorf("%w: buffer %#x+%d", virtq.ErrBadAddress, addr, length)
	}
	b.AddSegs(c, len(segs), length, write)
	return nil
}
