package guestmem

// Hint speeds up translation on a ring's hot path. A guest's buffers nearly
// always sit in the region of the previous buffer (one big region below
// 4 GiB, or the one above it), and walking the table costs as much as the
// rest of a pop. A Hint remembers that region and tries it first. Each ring
// makes its own (Memory.NewHint) when it is built over a Memory: it is not
// safe for concurrent use.
//
// Safety is guestmem's usual: a Hint only ever holds a copy of one of its
// Memory's Regions, whose Host New cut to exactly Size bytes; a buffer is
// accepted only if [gpa, gpa+n) lies within it, checked without overflow;
// the slice expression is bounds-checked again by Go.
type Hint struct {
	m    *Memory
	base uint64 // the hinted region's GuestAddr
	host []byte // its Host, exactly Size bytes
}

// NewHint returns a Hint for translating in m, hinting its first region.
func (m *Memory) NewHint() Hint {
	h := Hint{m: m}
	if len(m.regions) > 0 {
		h.base, h.host = m.regions[0].GuestAddr, m.regions[0].Host
	}
	return h
}

// Translate returns the host bytes of [gpa, gpa+n) when they lie in one
// region, trying the hinted region first and hinting the region it finds.
// ok is false when they do not (the buffer straddles regions, or is
// outside guest memory): the caller then uses Memory.AppendSegments, which
// splits it or reports the error. It is too big for Go's inliner: hot
// loops call Hinted, which is not, and Translate only when Hinted says no.
func (h *Hint) Translate(gpa, n uint64) (b []byte, ok bool) {
	if b, ok := h.Hinted(gpa, n); ok {
		return b, true
	}
	return h.miss(gpa, n)
}

// Hinted is Translate for the hinted region alone: ok is false when the
// buffer is not in it (it may still be in another region). It must stay
// inlinable (inline_test.go checks that it is).
func (h *Hint) Hinted(gpa, n uint64) (b []byte, ok bool) {
	host := h.host
	if off := gpa - h.base; off < uint64(len(host)) && n <= uint64(len(host))-off {
		return host[off : off+n : off+n], true
	}
	return nil, false
}

// miss is Translate when the hinted region does not hold the buffer.
func (h *Hint) miss(gpa, n uint64) ([]byte, bool) {
	for i := range h.m.regions {
		r := &h.m.regions[i]
		if off := gpa - r.GuestAddr; off < r.Size && n <= r.Size-off {
			h.base, h.host = r.GuestAddr, r.Host
			return r.Host[off : off+n : off+n], true
		}
	}
	return nil, false
}
