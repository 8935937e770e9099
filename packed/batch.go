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
// (virtio_dev_tx_batch_packed, virtio_dev_rx_batch_packed).
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

// popBatch pops the group of batch descriptors at r.availIdx when it is
// aligned and every one of them is a chain the fast path accepts (see
// above), and reports whether it did. On false nothing changed. The caller
// makes sure b has room for batch more chains and segments.
func (r *Ring) popBatch(b *virtq.Burst) bool {
	idx := r.availIdx
	if idx%batch != 0 || uint32(idx)+batch > uint32(r.size) {
		return false
	}
	off := int(idx) * descSize
	g := (*[batchBytes]byte)(r.desc[off : off+batchBytes])
	// Acquire loads of the four id|flags words first: the driver writes
	// each descriptor's flags last, so what the plain loads below read
	// is what it made available.
	w0 := guestmem.LoadAcquire32(g[:], 0*descSize+offIDFlags)
	w1 := guestmem.LoadAcquire32(g[:], 1*descSize+offIDFlags)
	w2 := guestmem.LoadAcquire32(g[:], 2*descSize+offIDFlags)
	w3 := guestmem.LoadAcquire32(g[:], 3*descSize+offIDFlags)
	ab := uint32(r.availBits) << 16
	const must = (flagAvail | flagUsed | flagNext | flagIndirect) << 16
	if ((w0^ab)|(w1^ab)|(w2^ab)|(w3^ab))&must != 0 {
		return false
	}
	id0, id1, id2, id3 := int(uint16(w0)), int(uint16(w1)), int(uint16(w2)), int(uint16(w3))
	// inflight has exactly size entries (New): checking ids against its
	// length is the range check and lets the compiler drop the bounds
	// checks of the four lookups.
	inflight := r.inflight
	if id0 >= len(inflight) || id1 >= len(inflight) || id2 >= len(inflight) || id3 >= len(inflight) ||
		id0 == id1 || id0 == id2 || id0 == id3 || id1 == id2 || id1 == id3 || id2 == id3 ||
		r.slotsInFlight+batch > uint32(r.size) {
		return false
	}
	if inflight[id0].descs|inflight[id1].descs|inflight[id2].descs|inflight[id3].descs != 0 {
		return false
	}
	l0 := binary.LittleEndian.Uint32(g[0*descSize+offLen:])
	l1 := binary.LittleEndian.Uint32(g[1*descSize+offLen:])
	l2 := binary.LittleEndian.Uint32(g[2*descSize+offLen:])
	l3 := binary.LittleEndian.Uint32(g[3*descSize+offLen:])
	if l0 == 0 || l1 == 0 || l2 == 0 || l3 == 0 {
		return false
	}
	h := &r.hint
	s0, ok0 := h.Hinted(binary.LittleEndian.Uint64(g[0*descSize+offAddr:]), uint64(l0))
	s1, ok1 := h.Hinted(binary.LittleEndian.Uint64(g[1*descSize+offAddr:]), uint64(l1))
	s2, ok2 := h.Hinted(binary.LittleEndian.Uint64(g[2*descSize+offAddr:]), uint64(l2))
	s3, ok3 := h.Hinted(binary.LittleEndian.Uint64(g[3*descSize+offAddr:]), uint64(l3))
	if !(ok0 && ok1 && ok2 && ok3) {
		return false
	}
	// Everything checked: commit the group.
	wm := uint32(r.writeMask) << 16
	b.AddSingle(uint16(id0), s0, w0&wm != 0)
	b.AddSingle(uint16(id1), s1, w1&wm != 0)
	b.AddSingle(uint16(id2), s2, w2&wm != 0)
	b.AddSingle(uint16(id3), s3, w3&wm != 0)
	inflight[id0] = inflightBuf{descs: 1, writeLen: writeLen(l0, w0, wm)}
	inflight[id1] = inflightBuf{descs: 1, writeLen: writeLen(l1, w1, wm)}
	inflight[id2] = inflightBuf{descs: 1, writeLen: writeLen(l2, w2, wm)}
	inflight[id3] = inflightBuf{descs: 1, writeLen: writeLen(l3, w3, wm)}
	if r.inOrder {
		r.recordOrder(0, uint16(id0))
		r.recordOrder(1, uint16(id1))
		r.recordOrder(2, uint16(id2))
		r.recordOrder(3, uint16(id3))
	}
	r.nInFlight += batch
	r.slotsInFlight += batch
	if idx += batch; idx == r.size {
		r.setAvail(0, !r.availWrap)
	} else {
		r.availIdx = idx
	}
	return true
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

// pushGroup writes the used descriptors of the four entries u at the
// aligned slot idx (idx+batch <= size; bits is the used flags word of its
// lap, shifted into place) when each names a different chain of one slot
// in flight, and reports whether it did; on false nothing changed and
// pushAny takes the entries one at a time. As there, a length is clamped
// to what the chain lets the device write, and the first used descriptor
// of the whole Push keeps its flags back for p to publish.
func (r *Ring) pushGroup(u *[batch]virtq.Used, idx uint16, bits uint32, p *publisher) bool {
	inflight := r.inflight
	i0, i1, i2, i3 := int(u[0].ID), int(u[1].ID), int(u[2].ID), int(u[3].ID)
	if i0 >= len(inflight) || i1 >= len(inflight) || i2 >= len(inflight) || i3 >= len(inflight) ||
		i0 == i1 || i0 == i2 || i0 == i3 || i1 == i2 || i1 == i3 || i2 == i3 {
		return false
	}
	f0, f1, f2, f3 := &inflight[i0], &inflight[i1], &inflight[i2], &inflight[i3]
	if f0.descs != 1 || f1.descs != 1 || f2.descs != 1 || f3.descs != 1 {
		return false
	}
	off := int(idx) * descSize
	g := (*[batchBytes]byte)(r.desc[off : off+batchBytes])
	l0, w0 := usedEntry(f0, &u[0], bits)
	l1, w1 := usedEntry(f1, &u[1], bits)
	l2, w2 := usedEntry(f2, &u[2], bits)
	l3, w3 := usedEntry(f3, &u[3], bits)
	f0.descs, f1.descs, f2.descs, f3.descs = 0, 0, 0, 0
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
	return true
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
