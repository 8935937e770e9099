package xsk

import "golang.org/x/sys/unix"

// TXReserve reserves up to n TX slots, each with a free frame of the
// socket, and returns how many it got (fewer when the TX ring is full or
// the stash is empty; both are counted). Fill slot i through TXBuffer(i)
// and TXSetLen(i, ...), then TXSubmit. Reservations accumulate until
// submitted.
func (s *Socket) TXReserve(n int) int {
	if s.tx == nil || s.fifo == nil || n <= 0 {
		return 0
	}
	want := uint32(n)
	want = min(want, uint32(s.alloc.free()))
	want = min(want, s.fifo.space()-s.txReserved)
	idx, got := s.tx.reserve(want)
	if got < uint32(n) {
		if got == want && want < uint32(n) {
			s.counters.TXNoFrames += uint64(uint32(n) - got)
		} else {
			s.counters.TXNoSlots += uint64(uint32(n) - got)
		}
	}
	if s.txReserved == 0 {
		s.txResIdx = idx
	}
	for i := range got {
		a, _ := s.alloc.get()
		d := s.tx.slot(idx + i)
		d.Addr, d.Len, d.Options = a, 0, 0
	}
	s.txReserved += got
	return int(got)
}

// TXBuffer is the whole frame behind reserved slot i: copy the frame to
// send into its start and set its length with TXSetLen.
func (s *Socket) TXBuffer(i int) []byte {
	if i < 0 || uint32(i) >= s.txReserved {
		return nil
	}
	a := s.tx.slot(s.txResIdx + uint32(i)).Addr
	end := a + uint64(s.frameCap)
	return s.umem.mem[a:end:end]
}

// TXSetLen sets the length of reserved slot i. A length of 0 or beyond the
// frame drops the slot at submit time (counted as TXTooLong when too long).
func (s *Socket) TXSetLen(i, length int) {
	if i < 0 || uint32(i) >= s.txReserved {
		return
	}
	if length < 0 || length > int(s.frameCap) {
		s.counters.TXTooLong++
		length = 0
	}
	s.tx.slot(s.txResIdx + uint32(i)).Len = uint32(length)
}

// TXSubmit submits the first n reserved slots (the rest are cancelled and
// their frames go back to the stash), then kicks the kernel once if it
// needs it. Slots of length 0 are dropped, never handed to the kernel: an
// invalid descriptor would never complete and break in-order matching. It
// returns how many descriptors went to the kernel; a kick that failed with
// something other than a transient errno is returned wrapped in ErrKick.
func (s *Socket) TXSubmit(n int) (int, error) {
	if s.tx == nil {
		return 0, ErrNoRing
	}
	if s.fifo == nil {
		return 0, ErrConfig // CallerTX: TransmitAt
	}
	keep := uint32(0)
	lim := min(uint32(max(n, 0)), s.txReserved)
	for i := range s.txReserved {
		d := s.tx.slot(s.txResIdx + i)
		if i >= lim || d.Len == 0 {
			s.alloc.put(d.Addr)
			continue
		}
		if keep != i {
			*s.tx.slot(s.txResIdx + keep) = *d
		}
		s.fifo.push(d.Addr &^ uint64(s.umem.cfg.FrameSize-1))
		keep++
	}
	s.tx.cancel(s.txReserved - keep)
	s.txReserved = 0
	if keep == 0 {
		return 0, nil
	}
	s.tx.submit()
	s.counters.TXSubmitted += uint64(keep)
	return int(keep), s.kickIfNeeded()
}

// Transmit copies frames into free UMEM frames and submits them with one
// kick. It returns how many of frames it consumed: sent, or dropped because
// longer than a UMEM frame (counted). The rest did not fit (TX ring full or
// no free frame): reap completions and try again.
func (s *Socket) Transmit(frames [][]byte) (int, error) {
	if s.txReserved > 0 {
		return 0, ErrTXOpen
	}
	k := s.TXReserve(len(frames))
	for i := range k {
		buf := s.TXBuffer(i)
		if len(frames[i]) > len(buf) {
			s.TXSetLen(i, -1)
			continue
		}
		s.TXSetLen(i, copy(buf, frames[i]))
	}
	_, err := s.TXSubmit(k)
	return k, err
}

// TransmitDescs sends frames already in the UMEM (e.g. received ones, for
// forwarding without a copy): ownership passes to the socket, and each
// frame returns to this socket's stash when it completes. Only frames of
// this socket's own share of the UMEM come back (others are counted as
// FreeRejected). Descriptors the kernel would refuse (empty, longer than a
// frame, outside the UMEM, across a chunk in aligned mode) are dropped and
// counted in TXBadDescs, and their frames stay the caller's. It returns how
// many descriptors it took (sent or dropped).
func (s *Socket) TransmitDescs(descs []Desc) (int, error) {
	if s.tx == nil {
		return 0, ErrNoRing
	}
	if s.fifo == nil {
		return 0, ErrConfig // CallerTX: TransmitAt
	}
	if s.txReserved > 0 {
		return 0, ErrTXOpen
	}
	want := min(uint32(len(descs)), s.fifo.space()-s.txReserved)
	idx, got := s.tx.reserve(want)
	if got < uint32(len(descs)) {
		s.counters.TXNoSlots += uint64(uint32(len(descs)) - got)
	}
	keep := uint32(0)
	for i := range got {
		d := descs[i]
		if !s.validTXDesc(d) {
			s.counters.TXBadDescs++
			continue
		}
		*s.tx.slot(idx + keep) = unix.XDPDesc{Addr: d.Addr, Len: d.Len}
		s.fifo.push(d.Addr &^ uint64(s.umem.cfg.FrameSize-1))
		keep++
	}
	s.tx.cancel(got - keep)
	if keep == 0 {
		return int(got), nil
	}
	s.tx.submit()
	s.counters.TXSubmitted += uint64(keep)
	return int(got), s.kickIfNeeded()
}

// validTXDesc applies the kernel's own TX descriptor checks. A descriptor
// the kernel refuses is counted in tx_invalid_descs and never completes,
// which would make every later completion free the wrong frame.
func (s *Socket) validTXDesc(d Desc) bool {
	mem := uint64(len(s.umem.mem))
	fs := uint64(s.umem.cfg.FrameSize)
	switch {
	case d.Len == 0 || uint64(d.Len) > fs:
		return false
	case d.Addr >= mem || uint64(d.Len) > mem-d.Addr:
		return false
	case !s.umem.cfg.Unaligned && d.Addr&(fs-1)+uint64(d.Len) > fs:
		return false // aligned mode: must not cross a chunk
	}
	return true
}

// Complete reaps the completion ring, returning each completed frame (in
// submission order) to the stash. If the kernel still has descriptors in
// the TX ring (copy mode sends at most TXBudget per kick), it kicks again.
func (s *Socket) Complete() (int, error) {
	if s.tx == nil || s.fifo == nil {
		return 0, nil
	}
	idx, got := s.comp.peek(s.comp.size)
	_ = idx // the addresses are not used: see txFIFO
	for range got {
		f, ok := s.fifo.pop()
		if !ok {
			s.counters.CompletionsLost++
			continue
		}
		s.alloc.put(f)
	}
	if got > 0 {
		s.comp.release()
		s.counters.TXCompleted += uint64(got)
	}
	if s.tx.pending() > 0 {
		return int(got), s.kickIfNeeded()
	}
	return int(got), nil
}

// TXOutstanding is how many submitted frames have not completed yet.
func (s *Socket) TXOutstanding() int {
	if s.fifo == nil {
		return 0
	}
	return int(s.fifo.len())
}

// needsKick: copy mode only transmits inside sendto, and without
// need_wakeup the kernel never tells; otherwise only when it asks.
func (s *Socket) needsKick() bool {
	return !s.zeroCopy || !s.wakeup || s.tx.needWakeup()
}

func (s *Socket) kickIfNeeded() error {
	if !s.needsKick() {
		return nil
	}
	return s.Kick()
}

// Kick asks the kernel to process the TX ring (sendto, MSG_DONTWAIT).
// Transient answers are counted, not returned.
func (s *Socket) Kick() error {
	s.counters.Kicks++
	return s.classify(sendtoKick(s.fd))
}

// classify sorts a kick's errno: EAGAIN, EBUSY (a frame over the MTU, or
// the device busy), ENOBUFS, ENETDOWN and EINTR are transient: counted.
func (s *Socket) classify(e unix.Errno) error {
	switch e {
	case 0:
		return nil
	case unix.EAGAIN, unix.EBUSY, unix.ENOBUFS, unix.ENETDOWN, unix.EINTR:
		s.counters.KickTransient++
		return nil
	}
	s.counters.KickErrors++
	return &kickError{e}
}

// kickError wraps a non-transient errno; Is(ErrKick) and Is(errno) hold.
type kickError struct{ errno unix.Errno }

func (e *kickError) Error() string   { return "xsk: kick failed: " + e.errno.Error() }
func (e *kickError) Unwrap() []error { return []error{ErrKick, e.errno} }
