package virtionet

// source streams the bytes an RX frame puts into guest buffers: the
// virtio-net header, then the frame's segments.
type source struct {
	cur  []byte   // what is left of the current segment
	rest [][]byte // the segments after it
}

func (s *source) start(hdr []byte, frame [][]byte) {
	s.cur = hdr
	s.rest = frame
}

// writeTo copies the next bytes into the segments dst, at most limit bytes
// in all, and returns how many it wrote.
func (s *source) writeTo(dst [][]byte, limit int) int {
	w := 0
	for _, d := range dst {
		if len(d) > limit-w {
			d = d[:limit-w]
		}
		for len(d) > 0 {
			for len(s.cur) == 0 {
				if len(s.rest) == 0 {
					return w
				}
				s.cur = s.rest[0]
				s.rest = s.rest[1:]
			}
			n := copy(d, s.cur)
			d = d[n:]
			s.cur = s.cur[n:]
			w += n
		}
		if w == limit {
			break
		}
	}
	return w
}
