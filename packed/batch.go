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

// popGroups pops aligned groups of batch descriptors from r.availIdx, up
// to the burst's room (at most max chains) and across the ring's end, for
// as long as every descriptor of the next group is a chain the fast path
// accepts (see above), and returns how many chains it popped. The group
// that stops it is left untouched, for the general path.
func (r *Ring) popGroups(b *virtq.Burst, max int) int {
	// Room for the whole run, checked once: every chain takes one chain
	// and one segment of the burst and one ring slot in flight. Ids are
	// checked against the in-flight table, so nInFlight needs no check of
	// its own (each id in flight is a distinct index below size).
	room := min(max-b.N, b.SegsLeft(), int(r.size)-int(r.slotsInFlight)) / batch * batch
	idx, wrap, size := int(r.availIdx), r.availWrap, int(r.size)
	if room == 0 || idx%batch != 0 {
		return 0
	}
	first, popped := b.N, 0
	for popped < room {
		// Whole groups up to the ring's end, in one lap.
		n := min(room-popped, (size-idx)/batch*batch)
		k := r.popLap(b, r.desc[idx*descSize:(idx+n)*descSize], uint32(availBits(wrap))<<16)
		popped += k
		if idx += k; idx == size {
			idx, wrap = 0, !wrap
		}
		if k != n || n == 0 {
			break
		}
	}
	if popped == 0 {
		return 0
	}
	if r.inOrder {
		// The order queue, in a pass of its own: popLap keeps fewer
		// values live without it.
		for i := first; i < b.N; i++ {
			r.recordOrder(i-first, b.Chains[i].ID)
		}
	}
	r.nInFlight += popped
	r.slotsInFlight += uint32(popped)
	r.setAvail(uint16(idx), wrap)
	return popped
}

// popLap pops the groups of run, whole groups of the ring in one lap
// whose available descriptors carry the AVAIL/USED bits ab (shifted into
// an id|flags word), up to the first group the fast path does not accept,
// and returns how many chains it popped. It records them in flight and in
// b; popGroups moves the ring's position. Little is live from one group to
// the next, so the compiler keeps the group's own values in registers.
func (r *Ring) popLap(b *virtq.Burst, run []byte, ab uint32) int {
	// inflight has exactly size entries (New): checking ids against its
	// length is the range check and lets the compiler drop the bounds
	// checks of the lookups.
	inflight, h := r.inflight, &r.hint
	wm := uint32(r.writeMask) << 16
	off := 0
	for ; off+batchBytes <= len(run); off += batchBytes {
		g := (*[batchBytes]byte)(run[off : off+batchBytes])
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
	}
	return off / descSize
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
// from the aligned slot idx of the lap whose wrap counter is wrap and
// across the ring's end, for as long as each entry of the next four names
// a different chain of one slot in flight. It returns how many entries it
// wrote and the used position after them; the group that stops it is left
// untouched, for pushAny to take entry by entry. As there, a length is
// clamped to what the chain lets the device write, and the first used
// descriptor of the whole Push keeps its flags back for p to publish.
func (r *Ring) pushGroups(used []virtq.Used, idx uint16, wrap bool, p *publisher) (int, uint16, bool) {
	at, size := int(idx), int(r.size)
	pushed := 0
	for pushed+batch <= len(used) {
		// Whole groups up to the ring's end, in one lap.
		n := min(len(used)-pushed, size-at) / batch * batch
		k := r.pushLap(used[pushed:pushed+n], r.desc[at*descSize:(at+n)*descSize], at*descSize, uint32(usedBits(wrap))<<16, p)
		pushed += k
		if at += k; at == size {
			at, wrap = 0, !wrap
		}
		if k != n || n == 0 {
			break
		}
	}
	return pushed, uint16(at), wrap
}

// pushLap writes the used descriptors of used into run, the same number of
// slots of the ring from byte offset base in one lap whose used descriptors
// carry the flags bits (shifted into an id|flags word), group by group up to the first group
// that does not qualify (see pushGroups), and returns how many it wrote.
// Little is live from one group to the next, so the compiler keeps the
// group's own values in registers.
func (r *Ring) pushLap(used []virtq.Used, run []byte, base int, bits uint32, p *publisher) int {
	inflight := r.inflight
	n := 0
	for ; n+batch <= len(used) && n*descSize+batchBytes <= len(run); n += batch {
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
		off := n * descSize
		g := (*[batchBytes]byte)(run[off : off+batchBytes])
		l0, w0 := usedEntry(f0, &u[0], bits)
		l1, w1 := usedEntry(f1, &u[1], bits)
		l2, w2 := usedEntry(f2, &u[2], bits)
		l3, w3 := usedEntry(f3, &u[3], bits)
		binary.LittleEndian.PutUint32(g[0*descSize+offLen:], l0)
		binary.LittleEndian.PutUint32(g[1*descSize+offLen:], l1)
		binary.LittleEndian.PutUint32(g[2*descSize+offLen:], l2)
		binary.LittleEndian.PutUint32(g[3*descSize+offLen:], l3)
		if p.first < 0 {
			p.first, p.firstWord = base+off, w0
		} else {
			binary.LittleEndian.PutUint32(g[0*descSize+offIDFlags:], w0)
		}
		binary.LittleEndian.PutUint32(g[1*descSize+offIDFlags:], w1)
		binary.LittleEndian.PutUint32(g[2*descSize+offIDFlags:], w2)
		binary.LittleEndian.PutUint32(g[3*descSize+offIDFlags:], w3)
	}
	return n
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
