package split

import (
	"encoding/binary"

	"github.com/xvswitch/xvswitch/guestmem"
	"github.com/xvswitch/xvswitch/virtq"
)

// The fast path of Pop (docs/ring-fast-path.md): a chain of one direct
// descriptor whose buffer lies in the hinted region, the common case of
// every guest that neither chains nor uses indirect tables. Avail entries
// are read four at a time (one 64-bit load where they do not wrap), and
// each head popped with no per-descriptor bookkeeping calls. Whatever the
// fast path does not accept, it leaves to popChain, which checks every
// case and says what is wrong.

// availGroup is how many avail entries Pop reads with one load.
const availGroup = 4

// touchAhead loads one word of the descriptor of each of the next n avail
// entries, all published (n is at most what the avail index says is
// ready), before any of them is popped. The driver writes descriptors on
// another core, so each is a cache miss, and popOne does a chain's worth
// of checks and translation between two of them: loaded in one go they
// are in flight together instead of a few at a time (Go has no prefetch
// instruction). A head out of range is skipped here and refused by the
// pop itself.
func (r *Ring) touchAhead(n int) {
	var t uint16
	for k := range n {
		head := guestmem.Load16(r.avail, 4+2*int((r.lastAvail+uint16(k))&r.mask))
		if uint32(head) < r.size {
			t ^= guestmem.Load16(r.desc, int(head)*descSize+12)
		}
	}
	r.touched = t
}

// popOne pops the chain at head when it is a single direct descriptor
// that passes every check popChain would make (head in range and not in
// flight, nonzero length, buffer in the hinted region) and reports
// whether it did; on false nothing changed. The descriptor is read once
// into locals. The caller makes sure b has room for one more chain and
// segment.
func (r *Ring) popOne(b *virtq.Burst, head uint16) bool {
	// inFlight has exactly size entries (New), so checking against its
	// length is the range check.
	inFlight := r.inFlight
	if int(head) >= len(inFlight) || inFlight[head] {
		return false
	}
	off := int(head) * descSize
	d := r.desc[off : off+descSize]
	addr := binary.LittleEndian.Uint64(d)
	hi := binary.LittleEndian.Uint64(d[8:])
	length, flags := uint32(hi), uint16(hi>>32)
	if flags&(descFNext|descFIndirect) != 0 || length == 0 {
		return false
	}
	host, ok := r.hint.Hinted(addr, uint64(length))
	if !ok {
		return false
	}
	writable := flags&r.writeMask != 0
	b.AddSingle(head, host, writable)
	inFlight[head] = true
	if writable {
		r.writeLen[head] = length
	} else {
		r.writeLen[head] = 0
	}
	return true
}
