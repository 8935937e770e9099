package xsk

// MaxBurst is the burst size the switch works in. Receive and Transmit
// accept any length; bursts of up to MaxBurst are what the data path uses.
const MaxBurst = 32

// Desc is one frame in the UMEM: Addr is the offset of its first byte in
// UMEM.Memory() (unaligned-mode encoding already resolved), Len its length.
type Desc struct {
	Addr uint64
	Len  uint32
}

// addrMask48 keeps the low 48 bits of an unaligned-mode address; the top
// 16 bits carry an offset to add (XSK_UNALIGNED_BUF_OFFSET_SHIFT).
const addrMask48 = 1<<48 - 1

// Refill moves frames from the socket's stash to the fill ring, as many as
// fit, and publishes them once. It returns how many it moved.
func (s *Socket) Refill() int {
	if s.fill == nil || s.rx == nil {
		return 0
	}
	n := uint32(s.alloc.free())
	if n == 0 {
		return 0
	}
	idx, got := s.fill.reserve(n)
	for i := range got {
		a, _ := s.alloc.get()
		s.fill.set(idx+i, a)
	}
	s.fill.submit()
	return int(got)
}

// Receive takes up to len(descs) received frames into descs and returns how
// many. The RX ring slots are handed back at once; the frames stay the
// caller's until Release (or TransmitDescs) returns them. It tops up the
// fill ring first, and when nothing arrived wakes the kernel if it asked
// for it (need_wakeup on the fill ring) or busy polling is on.
func (s *Socket) Receive(descs []Desc) int {
	if s.rx == nil || len(descs) == 0 {
		return 0
	}
	if !s.cfg.ManualFill {
		s.Refill()
	}
	idx, got := s.rx.peek(uint32(len(descs)))
	if got == 0 {
		if s.busy || (s.wakeup && s.fill.needWakeup()) {
			s.counters.RXWakeups++
			s.classify(recvfromWake(s.fd))
		}
		return 0
	}
	memLen := uint64(len(s.umem.mem))
	unaligned := s.umem.cfg.Unaligned
	n := 0
	for i := range got {
		d := s.rx.slot(idx + i)
		addr, length := d.Addr, d.Len
		if unaligned {
			addr = addr&addrMask48 + addr>>48
		}
		if addr >= memLen || uint64(length) > memLen-addr || length == 0 {
			// Never hand out memory outside the UMEM. If the frame is
			// identifiably ours, recycle it; otherwise it is lost (counted).
			s.counters.RXBadDescs++
			if addr < memLen {
				s.alloc.put(addr)
			}
			continue
		}
		descs[n] = Desc{Addr: addr, Len: length}
		n++
	}
	s.rx.release()
	s.counters.RXFrames += uint64(n)
	return n
}

// Frame returns the bytes of d inside the UMEM (capacity limited to the
// frame's length), or nil if d does not lie inside it.
func (s *Socket) Frame(d Desc) []byte {
	mem := s.umem.mem
	if d.Addr >= uint64(len(mem)) || uint64(d.Len) > uint64(len(mem))-d.Addr {
		return nil
	}
	end := d.Addr + uint64(d.Len)
	return mem[d.Addr:end:end]
}

// Release returns received frames to the socket's stash and refills the
// fill ring from it.
func (s *Socket) Release(descs []Desc) {
	for i := range descs {
		s.alloc.put(descs[i].Addr)
	}
	if !s.cfg.ManualFill {
		s.Refill()
	}
}

// AllocFrame takes a free frame from the socket's stash, for a caller that
// builds frames in the UMEM itself and sends them with TransmitDescs. It
// returns the frame's base address.
func (s *Socket) AllocFrame() (addr uint64, ok bool) { return s.alloc.get() }

// FreeFrame returns a frame (any address inside it) to the socket's stash;
// false if it is not one of the socket's frames or is already free.
func (s *Socket) FreeFrame(addr uint64) bool { return s.alloc.put(addr) }
