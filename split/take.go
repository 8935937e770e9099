package split

import (
	"encoding/binary"

	"github.com/xvswitch/xvswitch/guestmem"
	"github.com/xvswitch/xvswitch/virtq"
)

// The one-pass transmit path (virtq.Taker, docs/ring-fast-path.md), the
// split ring's counterpart of the packed ring's: each available head that
// is a single readable descriptor goes into the transmit queue's list of
// frames directly, not into a burst of chains the queue reads back.
//
// What it accepts is what popOne accepts (head in range and not in
// flight, neither NEXT nor INDIRECT, length nonzero, buffer in the hinted
// region or, failing that, in another single one), each descriptor read
// once into locals, and the descriptor readable (the WRITE flag is ignored
// on a ReadOnly ring, as Pop ignores it). The first entry that fails stops
// it untouched, for Pop to take and say what is wrong with it. Heads go in
// flight as they are taken, so one given twice stops the run at its
// second use and Pop then fails the ring, as it would have.

// Take implements virtq.Taker.
func (r *Ring) Take(j *virtq.TakeJob, max int) int {
	j.More = true // unless the run ends where the ready entries do
	if r.err != nil {
		return 0
	}
	// What the avail index says is ready, read once with acquire
	// ordering (as Pop); more than the ring holds is Pop's to refuse.
	ready := uint16(guestmem.LoadAcquire32(r.avail, 0)>>16) - r.lastAvail
	if uint32(ready) > r.size {
		return 0
	}
	n := min(max, virtq.MaxBurst, int(ready))
	inFlight := r.inFlight
	writeLen := r.writeLen[:len(inFlight)] // one bounds check here, none per head
	k := 0
	for ; k < n; k++ {
		head := guestmem.Load16(r.avail, 4+2*int((r.lastAvail+uint16(k))&r.mask))
		if int(head) >= len(inFlight) || inFlight[head] {
			break
		}
		off := int(head) * descSize
		d := (*[descSize]byte)(r.desc[off : off+descSize])
		addr := binary.LittleEndian.Uint64(d[0:8])
		hi := binary.LittleEndian.Uint64(d[8:16])
		length, flags := uint32(hi), uint16(hi>>32)
		if flags&(descFNext|descFIndirect) != 0 || flags&r.writeMask != 0 || length == 0 {
			break
		}
		buf, ok := r.hint.Hinted(addr, uint64(length))
		if !ok {
			// Another region (hinted from now on), or none: Pop then
			// splits the buffer or says what is wrong with it.
			if buf, ok = r.hint.Translate(addr, uint64(length)); !ok {
				break
			}
		}
		inFlight[head] = true
		writeLen[head] = 0
		j.Bufs[k] = buf
		j.Used[k] = virtq.Used{ID: head, Descs: 1}
	}
	if k == n {
		// Every ready entry (or max of them) taken: a Pop now would
		// read the avail index again for what the driver added since,
		// which the next poll finds as well.
		j.More = false
	}
	r.lastAvail += uint16(k)
	r.nInFlight += k
	return k
}

var _ virtq.Taker = (*Ring)(nil)
