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
// uses indirect tables fills the ring with single descriptors, and the
// fast path reads them a group of four at a time through a 64-byte window
// (one bounds check on the ring for the group, none per descriptor), as
// DPDK's vhost does (virtio_dev_tx_batch_packed,
// virtio_dev_rx_batch_packed). One call takes as many groups in a row as
// qualify, with the ring's position, wrap counter and counts in locals,
// stored once at the end, and the wrap boundary looked at once per lap.
//
// What it accepts is exactly what popOne accepts, and it pops it exactly
// as popOne would, one descriptor after the other, each checked on values
// read once into locals (a guest rewriting a descriptor under us cannot
// make a checked value differ from a used one): available in the current
// wrap and neither NEXT nor INDIRECT, its id in range and not in flight
// (the chains before it in the run are in flight already, so an id
// repeated within a group stops it too), its length nonzero and its buffer
// inside the hinted region, and a slot free in flight (checked once for
// the run). The first descriptor that does not qualify stops the run
// untouched, with the chains before it popped, and the general path takes
// it and says what is wrong; so does a group that is not aligned or would
// run past the end of the ring. Push writes used descriptors the same way
// (pushLap).

// batch is the number of descriptors the fast path pops or pushes at once.
const batch = 4

// batchBytes is the ring bytes of one group.
const batchBytes = batch * descSize

// popGroups pops chains of one descriptor from r.availIdx, which must be
// aligned, a group at a time up to the burst's room (at most max chains)
// and across the ring's end, for as long as each is one the fast path
// accepts (see above), and returns how many it popped. The descriptor that
// stops it is left untouched, for the general path.
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
	if order := r.order; order != nil {
		// IN_ORDER: the popped ids go to the order queue after the
		// newest in flight, in a pass of their own (popLap keeps fewer
		// values live without it).
		pos := r.orderHead + r.nInFlight
		if pos >= len(order) {
			pos -= len(order)
		}
		chains := b.Chains[first:b.N]
		for i := range chains {
			order[pos] = chains[i].ID
			if pos++; pos == len(order) {
				pos = 0
			}
		}
	}
	r.nInFlight += popped
	r.slotsInFlight += uint32(popped)
	r.setAvail(uint16(idx), wrap)
	return popped
}

// popLap pops the descriptors of run, whole groups of the ring in one lap
// whose available descriptors carry the AVAIL/USED bits ab (shifted into
// an id|flags word), up to the first one the fast path does not accept,
// and returns how many it popped. It records them in flight and in b;
// popGroups moves the ring's position. Each group is read through a
// 64-byte window (one bounds check), its four descriptors one after the
// other with constant offsets (none), each checked, claimed and added
// before the next is read: nothing of one descriptor stays live into the
// next, so the compiler keeps what it needs in registers.
func (r *Ring) popLap(b *virtq.Burst, run []byte, ab uint32) int {
	inflight, h := r.inflight, &r.hint
	wm := uint32(r.writeMask) << 16
	off := 0
	for ; off+batchBytes <= len(run); off += batchBytes {
		g := (*[batchBytes]byte)(run[off : off+batchBytes])
		id, ln, w, ok := single((*[descSize]byte)(g[0*descSize:]), ab, len(inflight))
		if !ok || inflight[id].descs != 0 {
			return off / descSize
		}
		s, ok := h.Hinted(binary.LittleEndian.Uint64(g[0*descSize+offAddr:]), uint64(ln))
		if !ok {
			return off / descSize
		}
		inflight[id] = inflightBuf{descs: 1, writeLen: writeLen(ln, w, wm)}
		b.AddSingle(uint16(id), s, w&wm != 0)

		if id, ln, w, ok = single((*[descSize]byte)(g[1*descSize:]), ab, len(inflight)); !ok || inflight[id].descs != 0 {
			return off/descSize + 1
		}
		if s, ok = h.Hinted(binary.LittleEndian.Uint64(g[1*descSize+offAddr:]), uint64(ln)); !ok {
			return off/descSize + 1
		}
		inflight[id] = inflightBuf{descs: 1, writeLen: writeLen(ln, w, wm)}
		b.AddSingle(uint16(id), s, w&wm != 0)

		if id, ln, w, ok = single((*[descSize]byte)(g[2*descSize:]), ab, len(inflight)); !ok || inflight[id].descs != 0 {
			return off/descSize + 2
		}
		if s, ok = h.Hinted(binary.LittleEndian.Uint64(g[2*descSize+offAddr:]), uint64(ln)); !ok {
			return off/descSize + 2
		}
		inflight[id] = inflightBuf{descs: 1, writeLen: writeLen(ln, w, wm)}
		b.AddSingle(uint16(id), s, w&wm != 0)

		if id, ln, w, ok = single((*[descSize]byte)(g[3*descSize:]), ab, len(inflight)); !ok || inflight[id].descs != 0 {
			return off/descSize + 3
		}
		if s, ok = h.Hinted(binary.LittleEndian.Uint64(g[3*descSize+offAddr:]), uint64(ln)); !ok {
			return off/descSize + 3
		}
		inflight[id] = inflightBuf{descs: 1, writeLen: writeLen(ln, w, wm)}
		b.AddSingle(uint16(id), s, w&wm != 0)
	}
	return off / descSize
}

// single reads the id|flags word and the length of descriptor d and
// reports whether it is a chain of one descriptor available in the wrap
// whose bits ab are (shifted into an id|flags word), with an id below
// size and a nonzero length. The acquire load of id|flags comes first: it
// makes the rest of the descriptor visible (the driver writes flags
// last). Every value is read once, and used as read.
func single(d *[descSize]byte, ab uint32, size int) (id int, ln, w uint32, ok bool) {
	w = guestmem.LoadAcquire32(d[:], offIDFlags)
	const must = (flagAvail | flagUsed | flagNext | flagIndirect) << 16
	id, ln = int(uint16(w)), binary.LittleEndian.Uint32(d[offLen:])
	return id, ln, w, (w^ab)&must == 0 && id < size && ln != 0
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

// pushGroups writes used descriptors for used from the aligned slot idx
// of the lap whose wrap counter is wrap, a group of four at a time and
// across the ring's end, for as long as each entry names a chain of one
// slot in flight. It returns how many entries it wrote and the used
// position after them; the entry that stops it is left untouched, for
// pushAny to take. As there, a length is clamped to what the chain lets
// the device write, and the first used descriptor of the whole Push keeps
// its flags back for p to publish.
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
// carry the flags bits (shifted into an id|flags word), up to the first
// entry that does not name a chain of one slot in flight, and returns how
// many it wrote. Each is released as it is written, so an id given twice
// stops it at its second entry; pushAny then goes on from that entry
// exactly as it would have gone through them all. Groups of four go
// through fixed-size windows of used and of the ring (one bounds check
// each), their entries one after the other with constant offsets.
func (r *Ring) pushLap(used []virtq.Used, run []byte, base int, bits uint32, p *publisher) int {
	inflight := r.inflight
	n := 0
	for ; n+batch <= len(used) && n*descSize+batchBytes <= len(run); n += batch {
		u := (*[batch]virtq.Used)(used[n : n+batch])
		off := n * descSize
		g := (*[batchBytes]byte)(run[off : off+batchBytes])
		f, ok := oneSlot(inflight, u[0].ID)
		if !ok {
			return n
		}
		ln, w := usedEntry(f, &u[0], bits)
		binary.LittleEndian.PutUint32(g[0*descSize+offLen:], ln)
		if p.first < 0 {
			p.first, p.firstWord = base+off, w
		} else {
			binary.LittleEndian.PutUint32(g[0*descSize+offIDFlags:], w)
		}
		if f, ok = oneSlot(inflight, u[1].ID); !ok {
			return n + 1
		}
		ln, w = usedEntry(f, &u[1], bits)
		binary.LittleEndian.PutUint32(g[1*descSize+offLen:], ln)
		binary.LittleEndian.PutUint32(g[1*descSize+offIDFlags:], w)
		if f, ok = oneSlot(inflight, u[2].ID); !ok {
			return n + 2
		}
		ln, w = usedEntry(f, &u[2], bits)
		binary.LittleEndian.PutUint32(g[2*descSize+offLen:], ln)
		binary.LittleEndian.PutUint32(g[2*descSize+offIDFlags:], w)
		if f, ok = oneSlot(inflight, u[3].ID); !ok {
			return n + 3
		}
		ln, w = usedEntry(f, &u[3], bits)
		binary.LittleEndian.PutUint32(g[3*descSize+offLen:], ln)
		binary.LittleEndian.PutUint32(g[3*descSize+offIDFlags:], w)
	}
	return n
}

// oneSlot releases and returns the in-flight record of id when it is a
// chain of one slot in flight; otherwise it changes nothing.
func oneSlot(inflight []inflightBuf, id uint16) (*inflightBuf, bool) {
	if int(id) >= len(inflight) || inflight[id].descs != 1 {
		return nil, false
	}
	f := &inflight[id]
	f.descs = 0
	return f, true
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
