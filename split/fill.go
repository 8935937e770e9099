package split

import (
	"encoding/binary"
	"fmt"
	"math/bits"

	"github.com/xvswitch/xvswitch/guestmem"
	"github.com/xvswitch/xvswitch/virtq"
)

// The one-pass receive path (virtq.Filler, docs/ring-fast-path.md), the
// split ring's counterpart of the packed ring's: a run of available heads,
// each a single writable descriptor long enough for head and frame, goes
// straight to a used element, with no burst of chains, no in-flight record
// set and cleared, no used list built and read back.
//
// What it accepts is what popOne accepts (head in range and not in flight,
// neither NEXT nor INDIRECT, length nonzero, buffer in one region), each
// descriptor read once into locals, and more: the descriptor writable, its
// buffer long enough. The first entry that fails stops it untouched, for
// Pop to take and say what is wrong with it. A head given twice in one
// Fill is caught by a stamp of the Fill's number (heads are not recorded
// in flight) and fails the ring with ErrBadID, as Pop does; checked where
// Pop checks a head, before its descriptor.
//
// Passes as the packed ring's: check each entry and write its header (a
// load first) and load the frame's first byte; copy the frames; write the
// used elements and publish the used index with one release store, as
// Push does. Nothing of the ring's state moves before the copies are
// done, so a memory fault leaves it as it was.
//
// A Linux guest's buffers start a line with the header, the frame 12
// bytes in: while the ring measures that cheaper (guestmem.StreamChoice,
// packed/fillcopy.go says why) the header's line goes with the frame's
// first bytes as one line written with streaming stores, a short frame's
// whole lines too (virtq.StreamsHead): their headers are left to the
// copy. A DPDK guest's frames, which start a line of their own, are
// copied ordinarily on this ring (packed/fillcopy.go).

// Fill implements virtq.Filler.
func (r *Ring) Fill(j *virtq.FillJob) (int, error) {
	j.Published, j.Streamed = 0, 0 // Published: one used index for the run, never eager
	if r.err != nil || r.dirty != nil || r.writeMask == 0 {
		return 0, nil
	}
	// What the avail index says is ready, read once with acquire
	// ordering (as Pop); more than the ring holds is Pop's to refuse.
	ready := uint16(guestmem.LoadAcquire32(r.avail, 0)>>16) - r.lastAvail
	if uint32(ready) > r.size {
		return 0, nil
	}
	n := min(j.N, virtq.MaxBurst, int(ready))
	// The way chosen before the first pass, which leaves the headers it
	// streams to the copy; the copies are what is timed.
	r.streaming.Begin(n)
	stream := r.streaming.Streams()
	filled, fill := r.stamps.Next()
	inFlight := r.inFlight
	filled = filled[:len(inFlight)]
	var dsts [virtq.MaxBurst][]byte
	var heads [virtq.MaxBurst]uint16
	var t byte
	var streamHead uint32 // by frame: the head streamed with the frame (virtq.StreamsHead), not written yet
	k := 0
	for ; k < n; k++ {
		head := guestmem.Load16(r.avail, 4+2*int((r.lastAvail+uint16(k))&r.mask))
		if int(head) >= len(inFlight) || inFlight[head] {
			break
		}
		if filled[head] == fill {
			return 0, r.fail(fmt.Errorf("fill: %w: head %d given twice", virtq.ErrBadID, head))
		}
		off := int(head) * descSize
		d := (*[descSize]byte)(r.desc[off : off+descSize])
		addr := binary.LittleEndian.Uint64(d[0:8])
		hi := binary.LittleEndian.Uint64(d[8:16])
		length, flags := uint32(hi), uint16(hi>>32)
		src := j.Src[k]
		need := virtq.FillHeadLen + len(src)
		if flags&(descFNext|descFIndirect) != 0 || flags&descFWrite == 0 || int64(length) < int64(need) || len(src) == 0 {
			break
		}
		dst, ok := r.hint.Hinted(addr, uint64(length))
		if !ok {
			// Another region (hinted from now on), or none: Pop then
			// splits the buffer or says what is wrong with it.
			if dst, ok = r.hint.Translate(addr, uint64(length)); !ok {
				break
			}
		}
		filled[head] = fill
		dst = dst[:need]
		if stream && virtq.StreamsHead(dst) {
			streamHead |= 1 << k
		} else {
			j.Head[k].Put(dst)
		}
		t ^= src[0]
		dsts[k], heads[k] = dst, head
	}
	if k == 0 {
		r.streaming.End(0, false)
		return 0, nil
	}
	r.touched ^= uint16(t)
	r.streaming.Restart()
	for m, dst := range dsts[:k] {
		if streamHead&(1<<m) == 0 {
			guestmem.Copy(dst[virtq.FillHeadLen:], j.Src[m])
		}
	}
	if streamHead != 0 {
		streamHeads(j, &dsts, k, streamHead)
	}
	r.streaming.End(k, streamHead != 0)
	j.Streamed = bits.OnesCount32(streamHead)
	u := r.usedIdx
	for m, dst := range dsts[:k] {
		off := 4 + 8*int(u&r.mask)
		binary.LittleEndian.PutUint64(r.used[off:off+8], uint64(heads[m])|uint64(len(dst))<<32)
		u++
	}
	r.lastAvail += uint16(k)
	r.usedIdx = u
	r.publishUsed()
	return k, nil
}

var _ virtq.Filler = (*Ring)(nil)

// streamHeads writes the frames of j that streamHead marks (by index,
// below k) into dsts with their heads (virtq.FillHead.StreamHead), then
// fences them: the streaming stores are weakly ordered, and the used index
// comes next.
func streamHeads(j *virtq.FillJob, dsts *[virtq.MaxBurst][]byte, k int, streamHead uint32) {
	for m := range k {
		if streamHead&(1<<m) != 0 {
			j.Head[m].StreamHead(dsts[m], j.Src[m])
		}
	}
	guestmem.StreamFence()
}
