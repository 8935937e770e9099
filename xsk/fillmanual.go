package xsk

// Manual fill (SocketConfig.ManualFill): the caller decides what the
// kernel receives into. A VM's owned queue offers the guest's own receive
// buffers (the zero-copy path) and keeps the socket's frames, the switch's
// area of the UMEM, for when the guest has none that fit.

// PostFill puts addresses of the caller's choosing on the fill ring, as
// many as fit, publishes them once and returns how many it took. Each
// must be the start of a chunk-sized piece of the UMEM that the kernel may
// write frame_len bytes into at headroom + 256: the caller checked that
// (the kernel skips an entry running past the UMEM's end, silently). A
// received frame comes back on the RX ring at addr + headroom + 256, and
// is the caller's, never returned to the socket's stash: Release refuses
// addresses outside the socket's frames.
func (s *Socket) PostFill(addrs []uint64) int {
	if s.fill == nil || s.rx == nil || len(addrs) == 0 {
		return 0
	}
	idx, got := s.fill.reserve(uint32(len(addrs)))
	for i := range got {
		s.fill.set(idx+i, addrs[i])
	}
	s.fill.submit()
	return int(got)
}

// RefillUpTo moves frames from the socket's stash to the fill ring until
// n of the socket's own frames are out (on the fill ring or in the
// kernel's hands: owned minus free, with no burst held by the caller),
// and returns how many it moved.
func (s *Socket) RefillUpTo(n int) int {
	if s.fill == nil || s.rx == nil {
		return 0
	}
	out := int(s.alloc.count) - s.alloc.free()
	want := n - out
	if want <= 0 {
		return 0
	}
	idx, got := s.fill.reserve(uint32(want))
	for i := range got {
		a, _ := s.alloc.get()
		s.fill.set(idx+i, a)
	}
	s.fill.submit()
	return int(got)
}

// FillFree is how many fill ring slots are free now (the kernel publishes
// its consumer index lazily: a lower bound).
func (s *Socket) FillFree() int {
	if s.fill == nil {
		return 0
	}
	return int(s.fill.free(s.fill.size))
}
