package virtionet

// Moved is o for the same frame with n bytes inserted (n > 0) or removed
// (n < 0) between its MACs and its L3 header: a VLAN tag a switch pushed
// or popped. csum_start and hdr_len count from the frame's first byte, so
// they move with the bytes after them; the zero Offload stays zero (a
// plain frame has neither). A value that would leave 0..65535 is clamped,
// and the receiver's own bounds checks then refuse it as for any header.
func (o Offload) Moved(n int) Offload {
	if o.IsZero() || n == 0 {
		return o
	}
	h := o.Header()
	h.CsumStart = clampU16(int(h.CsumStart) + n)
	if h.HdrLen != 0 {
		h.HdrLen = clampU16(int(h.HdrLen) + n)
	}
	return MakeOffload(h)
}

func clampU16(v int) uint16 { return uint16(min(max(v, 0), 0xffff)) }
