package xsk

import "golang.org/x/sys/unix"

// Transmitting caller-owned UMEM addresses (SocketConfig.CallerTX): a VM
// that owns NIC queues sends its frames from its own memory, which is the
// UMEM (the zero-copy transmit path, docs/zerocopy.md). The caller keeps
// its frame until the kernel completes it, and the completion names it by
// address, not by order: completions may come back out of submission order
// (they follow skb frees), and on 6.18 an odd unaligned address comes back
// with bit 0 cleared (0x5fcc for a TX at 0x5fcd). So the caller matches
// completions on CompletionKey(addr), and two frames in flight must never
// share a key. Such a socket never transmits frames of its own stash: the
// order-matched txFIFO of Transmit and TransmitDescs would be confused by
// completions it did not submit.

// CompletionKey is what a completion for a TX at addr carries on every
// kernel this runs on: addr with bit 0 cleared (offset bits kept).
func CompletionKey(addr uint64) uint64 { return addr &^ 1 }

// TXRoom is how many descriptors TransmitAt can take now: free TX slots,
// bounded so that every outstanding frame fits the completion ring. 0 on a
// socket without CallerTX.
func (s *Socket) TXRoom() int {
	if s.tx == nil || !s.cfg.CallerTX {
		return 0
	}
	room := min(s.tx.free(s.tx.size), s.comp.size-min(s.callerOut, s.comp.size))
	return int(room)
}

// ValidTX reports whether the kernel would take d on the TX ring (length
// 1..chunk, inside the UMEM, no chunk crossed in aligned mode). A refused
// descriptor would never complete: check each before TransmitAt.
func (s *Socket) ValidTX(d Desc) bool { return s.validTXDesc(d) }

// TransmitAt puts descs on the TX ring as they are (addresses of the
// caller's memory), publishes them once and kicks the kernel if it needs
// it. It sends from the front until the ring has no room (TXRoom) or a
// descriptor fails ValidTX (counted in TXBadDescs; it and the rest stay
// the caller's), and returns how many it sent: those are the kernel's
// until CompleteAt returns their keys. A kick that failed with something
// other than a transient errno is returned wrapped in ErrKick; the frames
// are on the ring all the same.
func (s *Socket) TransmitAt(descs []Desc) (int, error) {
	if s.tx == nil {
		return 0, ErrNoRing
	}
	if !s.cfg.CallerTX {
		return 0, ErrConfig
	}
	want := uint32(min(len(descs), s.TXRoom()))
	if want < uint32(len(descs)) {
		s.counters.TXNoSlots += uint64(uint32(len(descs)) - want)
	}
	idx, got := s.tx.reserve(want)
	k := uint32(0)
	for ; k < got; k++ {
		d := descs[k]
		if !s.validTXDesc(d) {
			s.counters.TXBadDescs++
			break
		}
		*s.tx.slot(idx + k) = unix.XDPDesc{Addr: d.Addr, Len: d.Len}
	}
	s.tx.cancel(got - k)
	if k == 0 {
		return 0, nil
	}
	s.tx.submit()
	s.callerOut += k
	s.counters.TXSubmitted += uint64(k)
	return int(k), s.kickIfNeeded()
}

// CompleteAt reaps up to len(out) completions into out, as keys
// (CompletionKey of the address sent), in the order the kernel completed
// them, and returns how many. If the kernel still has descriptors in the
// TX ring (copy mode sends at most the TX budget per kick), it kicks again.
func (s *Socket) CompleteAt(out []uint64) (int, error) {
	if s.tx == nil || !s.cfg.CallerTX || len(out) == 0 {
		return 0, nil
	}
	idx, got := s.comp.peek(uint32(len(out)))
	for i := range got {
		out[i] = CompletionKey(s.comp.slots[(idx+i)&s.comp.mask])
	}
	if got > 0 {
		s.comp.release()
		s.counters.TXCompleted += uint64(got)
		if got > s.callerOut {
			s.counters.CompletionsLost += uint64(got - s.callerOut)
			s.callerOut = 0
		} else {
			s.callerOut -= got
		}
	}
	if s.tx.pending() > 0 {
		return int(got), s.kickIfNeeded()
	}
	return int(got), nil
}

// TXAtOutstanding is how many TransmitAt descriptors have not completed.
func (s *Socket) TXAtOutstanding() int { return int(s.callerOut) }
