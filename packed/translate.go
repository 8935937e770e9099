package packed

import (
	"github.com/xvswitch/xvswitch/guestmem"
	"github.com/xvswitch/xvswitch/virtq"
)

// Buffer translation for the hot path.
//
// guestmem.AppendSegments is the general translation (any number of
// regions, buffers straddling them) and every slow path uses it. But a
// guest's frames nearly always sit in the region of the previous frame (one
// big region below 4 GiB, or the one above), and on the fast path walking
// the table costs as much as all the rest of a Pop. So the ring remembers
// the region of the last buffer it translated and tries it first.
// (guestmem.Hint does the same for the split ring; packed keeps its own copy
// of the check because here it inlines, and the call to Hint.Translate,
// too big for Go's inliner, measured ~30 instructions more per frame.)
//
// Invariants that keep this as safe as guestmem's own translation:
//   - hint always points at an element of cfg.Mem.Regions(), which the
//     Memory never changes, and whose Host slice guestmem.New cut to exactly
//     Size bytes;
//   - a buffer is accepted only if [addr, addr+len) lies within
//     [GuestAddr, GuestAddr+Size), checked without overflow (off < Size, then
//     len <= Size-off); the slice expression is bounds-checked again by Go.

// translate1 appends to b the host bytes of a buffer that lies in one
// region, trying the hinted region first. It returns false when the buffer
// is in no single region (it may straddle two, or be hostile): the caller
// then goes the general way.
func (r *Ring) translate1(b *virtq.Burst, c *virtq.Chain, addr uint64, ln uint32, write bool) bool {
	h := r.hint
	off := addr - h.GuestAddr
	if off >= h.Size || uint64(ln) > h.Size-off {
		if h = r.findRegion(addr, ln); h == nil {
			return false
		}
		r.hint = h
		off = addr - h.GuestAddr
	}
	tail := b.SegTail()
	if len(tail) == 0 {
		return false
	}
	tail[0] = h.Host[off : off+uint64(ln) : off+uint64(ln)]
	b.AddSegs(c, 1, ln, write)
	return true
}

// findRegion returns the region holding all of [addr, addr+ln), or nil.
func (r *Ring) findRegion(addr uint64, ln uint32) *guestmem.Region {
	regions := r.mem.Regions()
	for i := range regions {
		rg := &regions[i]
		if off := addr - rg.GuestAddr; off < rg.Size && uint64(ln) <= rg.Size-off {
			return rg
		}
	}
	return nil
}
