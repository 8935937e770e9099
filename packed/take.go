package packed

import (
	"encoding/binary"

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
// What it accepts is what popLap accepts, one descriptor after the other
// from any slot (no groups, no alignment): available in the current wrap,
// neither NEXT nor INDIRECT, id in range and not in flight, length
// nonzero, buffer inside the hinted region or, failing that, inside
// another single region (Translate; the hint follows it, as a Pop's
// translation does), and readable (the WRITE flag is ignored on a
// ReadOnly ring, as Pop ignores it). Each is checked on values read once.
// The first that fails stops it untouched, for Pop. Ids go in flight as
// they are taken, so one given twice in a run stops the run at its second
// use, and Pop then fails the ring with ErrBadID, as it would have.

// Take implements virtq.Taker.
func (r *Ring) Take(j *virtq.TakeJob, max int) int {
	if r.broken || r.inOrder {
		return 0
	}
	// At most the slots not in flight, as Pop.
	n := min(max, virtq.MaxBurst, int(r.size)-int(r.slotsInFlight))
	size := int(r.size)
	idx, wrap := int(r.availIdx), r.availWrap
	k := 0
	for k < n {
		// Up to the ring's end, in one lap: one wrap counter for all.
		m := min(n-k, size-idx)
		got := r.takeLap(j, k, r.desc[idx*descSize:(idx+m)*descSize], uint32(availBits(wrap))<<16)
		k += got
		if idx += got; idx == size {
			idx, wrap = 0, !wrap
		}
		if got != m {
			break
		}
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
// first it does not (see above).
func (r *Ring) takeLap(j *virtq.TakeJob, k int, lap []byte, ab uint32) int {
	inflight, h, size := r.inflight, &r.hint, int(r.size)
	wm := uint32(r.writeMask) << 16
	lap = lap[:min(len(lap), (virtq.MaxBurst-k)*descSize)]
	off := 0
	for ; off+descSize <= len(lap); off += descSize {
		d := (*[descSize]byte)(lap[off : off+descSize])
		id, ln, w, ok := single(d, ab, size)
		if !ok || w&wm != 0 || inflight[id].descs != 0 {
			break
		}
		addr := binary.LittleEndian.Uint64(d[offAddr:])
		buf, ok := h.Hinted(addr, uint64(ln))
		if !ok {
			// Another region (hinted from now on), or none: Pop then
			// splits the buffer or says what is wrong with it.
			if buf, ok = h.Translate(addr, uint64(ln)); !ok {
				break
			}
		}
		inflight[id] = inflightBuf{descs: 1}
		i := k + off/descSize
		j.Bufs[i] = buf
		j.Used[i] = virtq.Used{ID: uint16(id), Descs: 1}
	}
	return off / descSize
}

var _ virtq.Taker = (*Ring)(nil)
