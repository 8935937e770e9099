package packed

import (
	"encoding/binary"

	"github.com/xvswitch/xvswitch/guestmem"
	"github.com/xvswitch/xvswitch/virtq"
)

// The one-pass transmit path (virtq.Taker, docs/ring-fast-path.md).
//
// A guest's transmit ring is nearly always a run of single readable
// descriptors, each a header and a frame. Pop records each in the burst
// as a chain and a segment, which the transmit queue then reads back into
// its own list of frames: two representations of one buffer, built and
// read once each. Take pops into the list the queue reads, with the
// ring's position in locals.
//
// What it accepts is what popLap accepts, from any slot (four at a time
// where four are left, none of popGroups' alignment): available in the
// current wrap, neither NEXT nor INDIRECT, id in range and not in flight,
// length nonzero, buffer inside the hinted region or, failing that,
// inside another single region (rehint; the hint follows it, as a Pop's
// translation does), and readable (the WRITE flag is ignored on a
// ReadOnly ring, as Pop ignores it). Each is checked on values read once.
// The first that fails stops it untouched, for Pop. Ids go in flight as
// they are taken, so one given twice in a run stops the run at its second
// use, and Pop then fails the ring with ErrBadID, as it would have.

// Take implements virtq.Taker.
func (r *Ring) Take(j *virtq.TakeJob, max int) int {
	if r.broken || r.inOrder {
		j.More = true // Pop's to say what the ring is
		return 0
	}
	j.More = false
	// An empty ring costs one look at the next descriptor, as in Pop:
	// the run's setup is for a ring with something on it.
	if !r.availableAt(int(r.availIdx), r.availWrap) {
		return 0
	}
	// At most the slots not in flight, as Pop.
	n := min(max, virtq.MaxBurst, int(r.size)-int(r.slotsInFlight))
	size := int(r.size)
	idx, wrap := int(r.availIdx), r.availWrap
	k, rehinted := 0, 0
	for k < n {
		// Up to the ring's end, in one lap: one wrap counter for all.
		m := min(n-k, size-idx)
		got, miss := r.takeLap(j, k, r.desc[idx*descSize:(idx+m)*descSize], uint32(availBits(wrap))<<16)
		k += got
		if idx += got; idx == size {
			idx, wrap = 0, !wrap
		}
		if got == m {
			continue
		}
		// A buffer outside the hinted region: once the hint follows it
		// (another region), the run goes on from it; else Pop splits it
		// or says what is wrong with it. At most n times in one Take,
		// whatever the driver rewrites meanwhile.
		if !miss || rehinted == n || !r.rehint(idx) {
			// Pop has something to look at only if the driver made
			// the descriptor that stopped the run available.
			j.More = r.availableAt(idx, wrap)
			break
		}
		rehinted++
	}
	if k > 0 {
		r.nInFlight += k
		r.slotsInFlight += uint32(k)
		r.setAvail(uint16(idx), wrap)
	}
	return k
}

// takeLap takes the descriptors of lap, the next slots up to the ring's
// end at most, available with the bits ab (shifted into an id|flags
// word), into j from index k on, and returns how many it took, up to the
// first it does not (see above); miss says that one has a buffer outside
// the hinted region. Four descriptors at a time while four are left,
// written out as popLap's (one bounds check on the ring and on each
// destination for the four, constant offsets within them; a helper for
// one descriptor is beyond the inliner's budget), then one at a time.
// The loops call nothing (the translation of another region is
// rehint's, outside them), so that the compiler keeps their state in
// registers. Each Used entry is stored field by field: a literal is built
// in a temporary and copied.
func (r *Ring) takeLap(j *virtq.TakeJob, k int, lap []byte, ab uint32) (int, bool) {
	inflight, h, size := r.inflight, &r.hint, len(r.inflight)
	wm := uint32(r.writeMask) << 16
	bufs := j.Bufs[k:]
	bufs = bufs[:min(len(bufs), len(lap)/descSize)]
	used := j.Used[k:]
	used = used[:len(bufs)]
	x := 0
	for ; x+batch <= len(bufs); x += batch {
		g := (*[batchBytes]byte)(lap[x*descSize:])
		b4, u4 := (*[batch][]byte)(bufs[x:]), (*[batch]virtq.Used)(used[x:])

		id, ln, w, ok := single((*[descSize]byte)(g[0*descSize:]), ab, size)
		if !ok || w&wm != 0 || inflight[id].descs != 0 {
			return x, false
		}
		buf, ok := h.Hinted(binary.LittleEndian.Uint64(g[0*descSize+offAddr:]), uint64(ln))
		if !ok {
			return x, true
		}
		inflight[id] = inflightBuf{descs: 1}
		b4[0] = buf
		u4[0].ID, u4[0].Descs, u4[0].Len = uint16(id), 1, 0

		if id, ln, w, ok = single((*[descSize]byte)(g[1*descSize:]), ab, size); !ok || w&wm != 0 || inflight[id].descs != 0 {
			return x + 1, false
		}
		if buf, ok = h.Hinted(binary.LittleEndian.Uint64(g[1*descSize+offAddr:]), uint64(ln)); !ok {
			return x + 1, true
		}
		inflight[id] = inflightBuf{descs: 1}
		b4[1] = buf
		u4[1].ID, u4[1].Descs, u4[1].Len = uint16(id), 1, 0

		if id, ln, w, ok = single((*[descSize]byte)(g[2*descSize:]), ab, size); !ok || w&wm != 0 || inflight[id].descs != 0 {
			return x + 2, false
		}
		if buf, ok = h.Hinted(binary.LittleEndian.Uint64(g[2*descSize+offAddr:]), uint64(ln)); !ok {
			return x + 2, true
		}
		inflight[id] = inflightBuf{descs: 1}
		b4[2] = buf
		u4[2].ID, u4[2].Descs, u4[2].Len = uint16(id), 1, 0

		if id, ln, w, ok = single((*[descSize]byte)(g[3*descSize:]), ab, size); !ok || w&wm != 0 || inflight[id].descs != 0 {
			return x + 3, false
		}
		if buf, ok = h.Hinted(binary.LittleEndian.Uint64(g[3*descSize+offAddr:]), uint64(ln)); !ok {
			return x + 3, true
		}
		inflight[id] = inflightBuf{descs: 1}
		b4[3] = buf
		u4[3].ID, u4[3].Descs, u4[3].Len = uint16(id), 1, 0
	}
	for ; x < len(bufs); x++ {
		d := (*[descSize]byte)(lap[x*descSize:])
		id, ln, w, ok := single(d, ab, size)
		if !ok || w&wm != 0 || inflight[id].descs != 0 {
			return x, false
		}
		buf, ok := h.Hinted(binary.LittleEndian.Uint64(d[offAddr:]), uint64(ln))
		if !ok {
			return x, true
		}
		inflight[id] = inflightBuf{descs: 1}
		bufs[x] = buf
		used[x].ID, used[x].Descs, used[x].Len = uint16(id), 1, 0
	}
	return len(bufs), false
}

// availableAt reports whether descriptor idx carries the AVAIL/USED bits
// of the driver's wrap counter wrap (made available in that lap).
func (r *Ring) availableAt(idx int, wrap bool) bool {
	w := guestmem.LoadAcquire32(r.desc, idx*descSize+offIDFlags)
	return uint16(w>>16)&(flagAvail|flagUsed) == availBits(wrap)
}

// rehint points the hint at the region of the buffer of descriptor idx
// and reports whether one holds it whole. What the descriptor says is
// read again, and checked again, by the takeLap that follows.
func (r *Ring) rehint(idx int) bool {
	d := r.desc[idx*descSize : idx*descSize+descSize]
	_, ok := r.hint.Translate(binary.LittleEndian.Uint64(d[offAddr:]), uint64(binary.LittleEndian.Uint32(d[offLen:])))
	return ok
}

var _ virtq.Taker = (*Ring)(nil)
