package split

import (
	"encoding/binary"
	"fmt"

	"github.com/xvswitch/xvswitch/guestmem"
	"github.com/xvswitch/xvswitch/virtq"
)

// Push returns chains to the driver as used, in the order given: it writes
// the used elements, then publishes the used index with release ordering so
// the driver that sees the index sees the elements (and the bytes the
// device wrote into the buffers). Len is clamped to the chain's WriteLen,
// as on the packed ring.
//
// A Used whose ID is not in flight is a device bug, not a guest fault: Push
// then returns virtq.ErrUsedNotInFlight and writes nothing, and the ring
// stays usable.
func (r *Ring) Push(used []virtq.Used) error {
	if r.err != nil {
		return r.err
	}
	// Check every entry before writing any, so that a bad one leaves the
	// ring exactly as it was. Clearing as we go also catches an ID given
	// twice in one call.
	for i := range used {
		id := used[i].ID
		if uint32(id) >= r.size || !r.inFlight[id] {
			for j := 0; j < i; j++ {
				r.inFlight[used[j].ID] = true
			}
			return fmt.Errorf("split: %w: id %d (entry %d of %d)", virtq.ErrUsedNotInFlight, id, i, len(used))
		}
		r.inFlight[id] = false
	}
	if len(used) == 0 {
		return nil
	}
	u := r.usedIdx
	for i := range used {
		off := 4 + 8*int(u&r.mask)
		ln := min(used[i].Len, r.writeLen[used[i].ID])
		binary.LittleEndian.PutUint64(r.used[off:off+8], uint64(used[i].ID)|uint64(ln)<<32)
		u++
	}
	if r.dirty != nil {
		r.logUsed(r.usedIdx, len(used))
	}
	r.usedIdx = u
	r.nInFlight -= len(used)
	r.publishUsed()
	return nil
}

// publishUsed writes the used flags and index as one 32-bit release store.
// The device owns both halves of the word, so writing the flags along is
// free and needs no read of guest memory.
func (r *Ring) publishUsed() {
	guestmem.StoreRelease32(r.used, 0, uint32(r.usedFlags)|uint32(r.usedIdx)<<16)
	if r.dirty != nil {
		r.dirty.LogWrite(r.used[:4])
	}
}
