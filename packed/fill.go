package packed

import (
	"encoding/binary"
	"fmt"

	"github.com/xvswitch/xvswitch/guestmem"
	"github.com/xvswitch/xvswitch/virtq"
)

// The one-pass receive path (virtq.Filler, docs/ring-fast-path.md).
//
// A guest's receive ring is nearly always a run of single writable
// descriptors, each a buffer big enough for any frame, and a frame is
// nearly always one segment. For those, Pop then Push costs more than the
// frame: a chain and a segment recorded in the burst, an in-flight record
// set and cleared, a used list built and read back. Fill goes from the
// descriptor to the used descriptor directly, with the ring's position in
// locals, as DPDK's vhost does (virtio_dev_rx_batch_packed).
//
// What it accepts is what popLap accepts (available in the current wrap,
// neither NEXT nor INDIRECT, id in range and not in flight, length
// nonzero, buffer inside one region), each checked on values read once,
// and more: the descriptor writable, its buffer long enough for head
// and frame. The first that fails stops it untouched, for Pop to take and
// say what is wrong with it, so a hostile ring fails as it would have
// without Fill. The one check Pop makes that needs more is an id given
// twice in one burst: Fill does not record ids in flight (each buffer is
// used before it returns), so each use of an id is stamped with the
// Fill's number instead, and a second use in the same Fill fails the ring
// with ErrBadID, as Pop does.
//
// Passes, as in virtionet's placeRun: check every buffer and write its
// head (a load first: most heads are unchanged, see putHead) and load
// every frame's first byte, so that the run's cache misses are in flight
// together; then copy the frames; then write the used descriptors, the
// first one's flags last with a release store, as Push does. The ring's
// position moves only after the copies, so a memory fault in them leaves
// it as it was (the stamps left behind belong to a Fill that is over).

// Fill implements virtq.Filler.
func (r *Ring) Fill(j *virtq.FillJob) (int, error) {
	if r.broken || r.dirty != nil || r.inOrder || r.writeMask == 0 {
		return 0, nil
	}
	// At most the slots not in flight, a lap of the ring at most, as Pop:
	// the used descriptors written below never pass a slot not read.
	n := min(j.N, virtq.MaxBurst, int(r.size)-int(r.slotsInFlight))
	fill := r.nextFill()
	desc, inflight, size := r.desc, r.inflight, int(r.size)
	idx, wrap, ab := int(r.availIdx), r.availWrap, uint32(r.availBits)<<16
	h := &r.hint
	var ids [virtq.MaxBurst]uint16
	var dsts [virtq.MaxBurst][]byte
	var t byte
	k := 0
	for ; k < n; k++ {
		d := (*[descSize]byte)(desc[idx*descSize:])
		id, ln, w, ok := single(d, ab, size)
		src := j.Src[k]
		need := virtq.FillHeadLen + len(src)
		if !ok || w&(flagWrite<<16) == 0 || inflight[id].descs != 0 || int64(ln) < int64(need) || len(src) == 0 {
			break
		}
		addr := binary.LittleEndian.Uint64(d[offAddr:])
		dst, ok := h.Hinted(addr, uint64(ln))
		if !ok {
			// Another region (hinted from now on), or none: Pop then
			// splits the buffer or says what is wrong with it.
			if dst, ok = h.Translate(addr, uint64(ln)); !ok {
				break
			}
		}
		// Checked last, as Pop checks an id after its buffers.
		if inflight[id].filled == fill {
			return 0, r.fail(fmt.Errorf("packed: fill: %w: id %d given twice", virtq.ErrBadID, id))
		}
		inflight[id].filled = fill
		dst = dst[:need]
		putHead(dst, &j.Head[k])
		t ^= src[0]
		ids[k], dsts[k] = uint16(id), dst
		if idx++; idx == size {
			idx, wrap = 0, !wrap
			ab = uint32(availBits(wrap)) << 16
		}
	}
	if k == 0 {
		return 0, nil
	}
	r.touched ^= uint16(t)
	for m, dst := range dsts[:k] {
		copy(dst[virtq.FillHeadLen:], j.Src[m])
	}
	at, uwrap := int(r.usedIdx), r.usedWrap
	bits := uint32(usedBits(uwrap)|flagWrite) << 16
	first, firstWord := at*descSize, uint32(ids[0])|bits
	for m, dst := range dsts[:k] {
		d := (*[descSize]byte)(desc[at*descSize:])
		binary.LittleEndian.PutUint32(d[offLen:], uint32(len(dst)))
		if m != 0 {
			binary.LittleEndian.PutUint32(d[offIDFlags:], uint32(ids[m])|bits)
		}
		if at++; at == size {
			at, uwrap = 0, !uwrap
			bits = uint32(usedBits(uwrap)|flagWrite) << 16
		}
	}
	r.setAvail(uint16(idx), wrap)
	r.usedIdx, r.usedWrap = uint16(at), uwrap
	r.sincePushed += uint32(k)
	guestmem.StoreRelease32(desc, first+offIDFlags, firstWord)
	return k, nil
}

// nextFill numbers a new Fill. Numbers start at 1 (0 is a stamp no Fill
// made); when they come round, every stamp is cleared, so that one made
// 2^32 Fills ago can never pass for one of this Fill.
func (r *Ring) nextFill() uint32 {
	if r.fills++; r.fills == 0 {
		for i := range r.inflight {
			r.inflight[i].filled = 0
		}
		r.fills = 1
	}
	return r.fills
}

// putHead writes head h at the start of b unless b holds it already: a
// store must take the line away from the guest's core that read the
// header last, a load need not (virtionet's putHeaderUnlessEqual says
// more).
func putHead(b []byte, h *virtq.FillHead) {
	if binary.LittleEndian.Uint64(b) != h.Lo || binary.LittleEndian.Uint32(b[8:virtq.FillHeadLen]) != h.Hi {
		binary.LittleEndian.PutUint64(b, h.Lo)
		binary.LittleEndian.PutUint32(b[8:virtq.FillHeadLen], h.Hi)
	}
}

var _ virtq.Filler = (*Ring)(nil)
