package packed

import (
	"encoding/binary"

	"github.com/xvswitch/xvswitch/guestmem"
	"github.com/xvswitch/xvswitch/virtq"
)

// The batched fast path (docs/ring-fast-path.md).
//
// Four descriptors are 64 bytes: one cache line when the ring is 64-byte
// aligned, as every driver allocates it. A guest that neither chains nor
// uses indirect tables fills the ring with groups of four single
// descriptors, and popping them together costs one availability check and
// one bounds check on the ring for the group instead of one each, and no
// per-chain bookkeeping calls. DPDK's vhost does the same
// (virtio_dev_tx_batch_packed, virtio_dev_rx_batch_packed). One call takes
// as many groups in a row as qualify, with the ring's position, wrap
// counter and counts in locals, stored once at the end.
//
// What the group path accepts is exactly what popOne accepts, checked on
// values read once into locals (a guest rewriting a descriptor under us
// cannot make a checked value differ from a used one): every descriptor
// available in the current wrap and neither NEXT nor INDIRECT, every id in
// range, not in flight and not repeated within the group, every length
// nonzero and its buffer inside the hinted region, and room for four more
// slots in flight. Anything else, or a group that is not aligned or would
// run past the end of the ring (the wrap boundary), pops nothing here:
// the general path takes over one chain at a time and says what is wrong.

// batch is the number of descriptors the fast path pops or pushes at once.
const batch = 4

// batchBytes is the ring bytes of one group.
const batchBytes = batch * descSize

// popGroups pops aligned groups of batch descriptors from r.availIdx for
// as long as every descriptor of the next group is a chain the fast path
// accepts (see above) and the burst (at most max chains) has room, and
// returns how many chains it popped. The group that stops it is left
// untouched, for the general path.
func (r *Ring) popGroups(b *virtq.Burst, max int) int {
	// Room for the whole run, checked once: every chain takes one chain
	// and one segment of the burst and one ring slot in flight. Ids are
	// checked against the in-flight table, so nInFlight needs no check of
	// its own (each id in flight is a distinct index below size).
	room := min(max-b.N, b.SegsLeft(), int(r.size)-int(r.slotsInFlight))
	idx, wrap, size := r.availIdx, r.availWrap, r.size
	if room < batch || idx%batch != 0 {
		return 0
	}
	desc, inflight, h := r.desc, r.inflight, &r.hint
	inOrder := r.inOrder
	ab := uint32(r.availBits) << 16
	wm := uint32(r.writeMask) << 16
	n := 0
	for n+batch <= room && uint32(idx)+batch <= uint32(size) {
		off := int(idx) * descSize
		g := (*[batchBytes]byte)(desc[off : off+batchBytes])
		// Acquire loads of the four id|flags words first: the driver
		// writes each descriptor's flags last, so what the plain loads
		// below read is what it made available.
		w0 := guestmem.LoadAcquire32(g[:], 0*descSize+offIDFlags)
		w1 := guestmem.LoadAcquire32(g[:], 1*descSize+offIDFlags)
		w2 := guestmem.LoadAcquire32(g[:], 2*descSize+offIDFlags)
		w3 := guestmem.LoadAcquire32(g[:], 3*descSize+offIDFlags)
		const must = (flagAvail | flagUsed | flagNext | flagIndirect) << 16
		if ((w0^ab)|(w1^ab)|(w2^ab)|(w3^ab))&must != 0 {
			break
		}
		id0, id1, id2, id3 := int(uint16(w0)), int(uint16(w1)), int(uint16(w2)), int(uint16(w3))
		// inflight has exactly size entries (New): checking ids against
		// its length is the range check and lets the compiler drop the
		// bounds checks of the lookups.
		if id0 >= len(inflight) || id1 >= len(inflight) || id2 >= len(inflight) || id3 >= len(inflight) {
			break
		}
		l0 := binary.LittleEndian.Uint32(g[0*descSize+offLen:])
		l1 := binary.LittleEndian.Uint32(g[1*descSize+offLen:])
		l2 := binary.LittleEndian.Uint32(g[2*descSize+offLen:])
		l3 := binary.LittleEndian.Uint32(g[3*descSize+offLen:])
		if l0 == 0 || l1 == 0 || l2 == 0 || l3 == 0 {
			break
		}
		s0, ok0 := h.Hinted(binary.LittleEndian.Uint64(g[0*descSize+offAddr:]), uint64(l0))
		s1, ok1 := h.Hinted(binary.LittleEndian.Uint64(g[1*descSize+offAddr:]), uint64(l1))
		s2, ok2 := h.Hinted(binary.LittleEndian.Uint64(g[2*descSize+offAddr:]), uint64(l2))
		s3, ok3 := h.Hinted(binary.LittleEndian.Uint64(g[3*descSize+offAddr:]), uint64(l3))
		if !(ok0 && ok1 && ok2 && ok3) {
			break
		}
		// Not in flight: each id is claimed as it is checked, so an id
		// repeated within the group finds its own first claim; a failed
		// check gives back the claims before it, and the group is left
		// as it was.
		f0, f1, f2, f3 := &inflight[id0], &inflight[id1], &inflight[id2], &inflight[id3]
		if f0.descs != 0 {
			break
		}
		f0.descs = 1
		if f1.descs != 0 {
			f0.descs = 0
			break
		}
		f1.descs = 1
		if f2.descs != 0 {
			f0.descs, f1.descs = 0, 0
			break
		}
		f2.descs = 1
		if f3.descs != 0 {
			f0.descs, f1.descs, f2.descs = 0, 0, 0
			break
		}
		f3.descs = 1
		// Everything checked: commit the group.
		f0.writeLen = writeLen(l0, w0, wm)
		f1.writeLen = writeLen(l1, w1, wm)
		f2.writeLen = writeLen(l2, w2, wm)
		f3.writeLen = writeLen(l3, w3, wm)
		b.AddSingle(uint16(id0), s0, w0&wm != 0)
		b.AddSingle(uint16(id1), s1, w1&wm != 0)
		b.AddSingle(uint16(id2), s2, w2&wm != 0)
		b.AddSingle(uint16(id3), s3, w3&wm != 0)
		if inOrder {
			// r.nInFlight is stored after the run: n places on.
			r.recordOrder(n+0, uint16(id0))
			r.recordOrder(n+1, uint16(id1))
			r.recordOrder(n+2, uint16(id2))
			r.recordOrder(n+3, uint16(id3))
		}
		n += batch
		if idx += batch; idx == size {
			idx, wrap = 0, !wrap
			ab = uint32(availBits(wrap)) << 16
		}
	}
	if n != 0 {
		r.nInFlight += n
		r.slotsInFlight += uint32(n)
		r.setAvail(idx, wrap)
	}
	return n
}

// writeLen is what a single descriptor of length ln and id|flags word w
// lets the device write: all of it when it is writable on this ring.
func writeLen(ln, w, writeMask uint32) uint32 {
	if w&writeMask != 0 {
		return ln
	}
	return 0
}

// recordOrder puts id k places after the newest in-flight id of the
// IN_ORDER queue (k < size - nInFlight). A conditional subtraction, not a
// modulo: a division per frame costs more than the rest of the bookkeeping.
func (r *Ring) recordOrder(k int, id uint16) {
	i := r.orderHead + r.nInFlight + k
	if i >= len(r.order) {
		i -= len(r.order)
	}
	r.order[i] = id
}

// pushGroups writes used descriptors for used, four entries at a time
// from the aligned slot idx of the lap whose wrap counter is wrap, for as
// long as each entry of the next four names a different chain of one slot
// in flight and the group ends before the ring does. It returns how many
// entries it wrote and the used position after them; the group that stops
// it is left untouched, for pushAny to take entry by entry. As there, a
// length is clamped to what the chain lets the device write, and the first
// used descriptor of the whole Push keeps its flags back for p to publish.
func (r *Ring) pushGroups(used []virtq.Used, idx uint16, wrap bool, p *publisher) (int, uint16, bool) {
	desc, inflight, size := r.desc, r.inflight, r.size
	bits := uint32(usedBits(wrap)) << 16
	n := 0
	for n+batch <= len(used) && uint32(idx)+batch <= uint32(size) {
		u := (*[batch]virtq.Used)(used[n : n+batch])
		i0, i1, i2, i3 := int(u[0].ID), int(u[1].ID), int(u[2].ID), int(u[3].ID)
		if i0 >= len(inflight) || i1 >= len(inflight) || i2 >= len(inflight) || i3 >= len(inflight) {
			break
		}
		// In flight with one slot: each is released as it is checked,
		// so an id given twice finds its own first release; a failed
		// check takes back the releases before it.
		f0, f1, f2, f3 := &inflight[i0], &inflight[i1], &inflight[i2], &inflight[i3]
		if f0.descs != 1 {
			break
		}
		f0.descs = 0
		if f1.descs != 1 {
			f0.descs = 1
			break
		}
		f1.descs = 0
		if f2.descs != 1 {
			f0.descs, f1.descs = 1, 1
			break
		}
		f2.descs = 0
		if f3.descs != 1 {
			f0.descs, f1.descs, f2.descs = 1, 1, 1
			break
		}
		f3.descs = 0
		off := int(idx) * descSize
		g := (*[batchBytes]byte)(desc[off : off+batchBytes])
		l0, w0 := usedEntry(f0, &u[0], bits)
		l1, w1 := usedEntry(f1, &u[1], bits)
		l2, w2 := usedEntry(f2, &u[2], bits)
		l3, w3 := usedEntry(f3, &u[3], bits)
		binary.LittleEndian.PutUint32(g[0*descSize+offLen:], l0)
		binary.LittleEndian.PutUint32(g[1*descSize+offLen:], l1)
		binary.LittleEndian.PutUint32(g[2*descSize+offLen:], l2)
		binary.LittleEndian.PutUint32(g[3*descSize+offLen:], l3)
		if p.first < 0 {
			p.first, p.firstWord = off, w0
		} else {
			binary.LittleEndian.PutUint32(g[0*descSize+offIDFlags:], w0)
		}
		binary.LittleEndian.PutUint32(g[1*descSize+offIDFlags:], w1)
		binary.LittleEndian.PutUint32(g[2*descSize+offIDFlags:], w2)
		binary.LittleEndian.PutUint32(g[3*descSize+offIDFlags:], w3)
		n += batch
		if idx += batch; idx == size {
			idx, wrap = 0, !wrap
			bits = uint32(usedBits(wrap)) << 16
		}
	}
	return n, idx, wrap
}

// usedEntry returns the length and id|flags word of the used descriptor
// for entry u of in-flight chain f: the length clamped to what the chain
// lets the device write, WRITE set when it is not zero.
func usedEntry(f *inflightBuf, u *virtq.Used, bits uint32) (ln, word uint32) {
	ln = min(u.Len, f.writeLen)
	word = uint32(u.ID) | bits
	if ln != 0 {
		word |= flagWrite << 16
	}
	return ln, word
}

// touchAhead loads one word of every cache line of descriptors the next n
// pops may read (one per group of four), before any of them is looked at.
// The driver writes them on another core, so each is a cache miss; loaded
// in one go they are in flight together instead of one after the other
// (Go has no prefetch instruction). The values are not used: only their
// XOR is kept, so that the loads are not optimised away.
func (r *Ring) touchAhead(n int) {
	desc, size := r.desc, int(r.size)
	n = min(n, size)
	idx := int(r.availIdx)
	var t uint16
	for k := 0; k < n; k += batch {
		i := idx + k
		if i >= size {
			i -= size
		}
		t ^= guestmem.Load16(desc, i*descSize+offIDFlags)
	}
	r.touched = t
}
