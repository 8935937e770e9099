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
// head (a load first: most heads are unchanged, see virtq.FillHead.Put;
// not where the head's line is streamed with the frame, fillcopy.go) and
// load every frame's first byte, so that the run's cache misses are in
// flight together; then copy the frames; then write the used descriptors,
// the first one's flags last with a release store, as Push does. The
// ring's position moves only after the copies, so a memory fault in them
// leaves it as it was (the stamps left behind belong to a Fill that is
// over).
// An eager Fill does the last two a line at a time (filleager.go).

// Fill implements virtq.Filler.
func (r *Ring) Fill(j *virtq.FillJob) (int, error) {
	j.Published, j.Streamed = 0, 0
	if r.broken || r.dirty != nil || r.inOrder || r.writeMask == 0 {
		return 0, nil
	}
	// At most the slots not in flight, a lap of the ring at most, as Pop:
	// the used descriptors written below never pass a slot not read.
	n := min(j.N, virtq.MaxBurst, int(r.size)-int(r.slotsInFlight))
	// Frames stream while the ring measures that cheaper; one burst in
	// 64 is timed, each way in turn (fillcopy.go). The way is chosen
	// before the first pass, which writes the heads it does not stream
	// with their frames; the copies are what is timed.
	stream := false
	if !j.Eager {
		r.streaming.Begin(n)
		stream = r.streaming.Streams()
	}
	var run fillRun
	run.stream = stream
	run.filled, run.fill = r.stamps.Next()
	size := int(r.size)
	idx, wrap := int(r.availIdx), r.availWrap
	for run.k < n {
		// Up to the ring's end, in one lap: one wrap counter for all.
		m := min(n-run.k, size-idx)
		got, err := r.checkLap(j, &run, r.desc[idx*descSize:(idx+m)*descSize], uint32(availBits(wrap))<<16)
		if err != nil {
			return 0, err
		}
		if idx += got; idx == size {
			idx, wrap = 0, !wrap
		}
		if got != m {
			break
		}
	}
	k := run.k
	if k == 0 {
		r.streaming.End(0, false)
		return 0, nil
	}
	r.touched ^= uint16(run.t)
	if j.Eager {
		r.publishEach(j, &run, k) // filleager.go
		return k, nil
	}
	r.streaming.Restart()
	streamed := 0
	for m, dst := range run.dsts[:k] {
		switch src := j.Src[m]; {
		case run.streamHead&(1<<m) != 0:
			j.Head[m].StreamHead(dst, src)
			streamed++
		case stream && streams(dst[virtq.FillHeadLen:], src):
			guestmem.CopyStream(dst[virtq.FillHeadLen:], src)
			streamed++
		default:
			guestmem.Copy(dst[virtq.FillHeadLen:], src)
		}
	}
	if streamed > 0 {
		guestmem.StreamFence() // before the used descriptors: the frames' streaming stores are weakly ordered
	}
	r.streaming.End(k, streamed > 0)
	j.Streamed = streamed
	at, uwrap := int(r.usedIdx), r.usedWrap
	first, firstWord := at*descSize, uint32(run.ids[0])|uint32(usedBits(uwrap)|flagWrite)<<16
	for done := 0; done < k; {
		m := min(k-done, size-at)
		usedLap(r.desc[at*descSize:(at+m)*descSize], run.ids[done:done+m], run.dsts[done:done+m], uint32(usedBits(uwrap)|flagWrite)<<16, done == 0)
		done += m
		if at += m; at == size {
			at, uwrap = 0, !uwrap
		}
	}
	r.setAvail(uint16(idx), wrap)
	r.usedIdx, r.usedWrap = uint16(at), uwrap
	r.sincePushed += uint32(k)
	guestmem.StoreRelease32(r.desc, first+offIDFlags, firstWord)
	return k, nil
}

// fillRun is what a Fill's first pass found: the buffers, their ids, the
// XOR of the frames' first bytes (so that their loads stay).
type fillRun struct {
	dsts       [virtq.MaxBurst][]byte
	ids        [virtq.MaxBurst]uint16
	k          int
	filled     []uint32 // the ring's stamps (virtq.FillStamps) and this Fill's number
	fill       uint32
	t          byte
	stream     bool   // the Fill streams
	streamHead uint32 // by frame: the head streamed with the frame (virtq.StreamsHead), not written yet
}

// checkLap is Fill's first pass over the descriptors of lap, the next
// slots up to the ring's end at most, available with the bits ab (shifted
// into an id|flags word): it checks each and the frame for it, writes the
// head into the buffer (or marks it in run.streamHead, for the copy to
// write with the frame), and returns how many it took, up to the first it
// does not (see above).
func (r *Ring) checkLap(j *virtq.FillJob, run *fillRun, lap []byte, ab uint32) (int, error) {
	inflight, h, size := r.inflight, &r.hint, int(r.size)
	k, t, fill := run.k, run.t, run.fill
	filled := run.filled[:len(inflight)] // one bounds check here, none per id
	lap = lap[:min(len(lap), (virtq.MaxBurst-k)*descSize)]
	off := 0
	for ; off+descSize <= len(lap); off += descSize {
		d := (*[descSize]byte)(lap[off : off+descSize])
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
		if filled[id] == fill {
			return 0, r.fail(fmt.Errorf("packed: fill: %w: id %d given twice", virtq.ErrBadID, id))
		}
		filled[id] = fill
		dst = dst[:need]
		if run.stream && virtq.StreamsHead(dst) {
			run.streamHead |= 1 << k
		} else {
			j.Head[k].Put(dst)
		}
		t ^= src[0]
		run.ids[k], run.dsts[k] = uint16(id), dst
		k++
	}
	run.k, run.t = k, t
	return off / descSize, nil
}

// usedLap writes the used descriptors of Fill's buffers ids and dsts into
// lap, as many slots from the used position on, in one lap whose used
// descriptors carry the flags bits; held: the first one's flags are left
// for Fill to store last.
func usedLap(lap []byte, ids []uint16, dsts [][]byte, bits uint32, held bool) {
	for i, dst := range dsts {
		if i >= len(ids) || i*descSize+descSize > len(lap) {
			return
		}
		d := (*[descSize]byte)(lap[i*descSize : i*descSize+descSize])
		binary.LittleEndian.PutUint32(d[offLen:], uint32(len(dst)))
		if i != 0 || !held {
			binary.LittleEndian.PutUint32(d[offIDFlags:], uint32(ids[i])|bits)
		}
	}
}

var _ virtq.Filler = (*Ring)(nil)
