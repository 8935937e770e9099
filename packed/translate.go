package packed

import (
	"github.com/xvswitch/xvswitch/virtq"
)

// Buffer translation for the hot path.
//
// guestmem.AppendSegments is the general translation (any number of
// regions, buffers straddling them) and every slow path uses it. But a
// guest's frames nearly always sit in the region of the previous frame (one
// big region below 4 GiB, or the one above), and on the fast path walking
// the table costs as much as all the rest of a Pop. So the ring remembers
// the region of the last buffer it translated (a guestmem.Hint, as the
// split ring does) and tries it first with Hint.Hinted, which inlines;
// Hint.Translate, which walks the table, runs only when that misses.

// translate1 appends to b the host bytes of a buffer that lies in one
// region, trying the hinted region first. It returns false when the buffer
// is in no single region (it may straddle two, or be hostile): the caller
// then goes the general way.
func (r *Ring) translate1(b *virtq.Burst, c *virtq.Chain, addr uint64, ln uint32, write bool) bool {
	tail := b.SegTail()
	if len(tail) == 0 {
		return false
	}
	host, ok := r.hint.Hinted(addr, uint64(ln))
	if !ok {
		if host, ok = r.hint.Translate(addr, uint64(ln)); !ok {
			return false
		}
	}
	tail[0] = host
	b.AddSegs(c, 1, ln, write)
	return true
}
