package xsk

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// xdpMaxTXSKBBudget is XDP_MAX_TX_SKB_BUDGET (linux/if_xdp.h, Linux 6.17+).
const xdpMaxTXSKBBudget = unix.XDP_MAX_TX_SKB_BUDGET

// setTXBudget raises how many descriptors copy-mode TX sends per kick
// (default 32). Kernels without the option answer ENOPROTOOPT; a value the
// kernel refuses leaves the default: neither is an error.
func (s *Socket) setTXBudget() {
	if s.tx == nil || s.cfg.TXBudget == 0 {
		return
	}
	if err := unix.SetsockoptInt(s.fd, unix.SOL_XDP, xdpMaxTXSKBBudget, int(s.cfg.TXBudget)); err == nil {
		s.txBudget = s.cfg.TXBudget
	}
}

// TXBudget is the XDP_MAX_TX_SKB_BUDGET in force; 0 means the kernel's
// default (the option was refused or is unknown).
func (s *Socket) TXBudget() uint32 { return s.txBudget }

// setBusyPoll applies SO_PREFER_BUSY_POLL, SO_BUSY_POLL and
// SO_BUSY_POLL_BUDGET. Raising SO_BUSY_POLL needs CAP_NET_ADMIN and old
// kernels lack the others: EPERM and ENOPROTOOPT leave busy polling off
// and are noted (BusyPolling), not returned.
func (s *Socket) setBusyPoll() {
	bp := s.cfg.BusyPoll
	if bp.Usecs == 0 {
		return
	}
	opts := []struct {
		name string
		opt  int
		val  uint32
	}{
		{"SO_PREFER_BUSY_POLL", unix.SO_PREFER_BUSY_POLL, 1},
		{"SO_BUSY_POLL", unix.SO_BUSY_POLL, bp.Usecs},
		{"SO_BUSY_POLL_BUDGET", unix.SO_BUSY_POLL_BUDGET, bp.Budget},
	}
	for _, o := range opts {
		if o.opt == unix.SO_BUSY_POLL_BUDGET && o.val == 0 {
			continue
		}
		if err := unix.SetsockoptInt(s.fd, unix.SOL_SOCKET, o.opt, int(o.val)); err != nil {
			if errors.Is(err, unix.EPERM) || errors.Is(err, unix.ENOPROTOOPT) || errors.Is(err, unix.EINVAL) {
				s.busyPollNote = fmt.Sprintf("busy polling off: %s=%d: %v", o.name, o.val, err)
				return
			}
			s.busyPollNote = fmt.Sprintf("busy polling off: %s=%d: unexpected %v", o.name, o.val, err)
			return
		}
	}
	s.busy = true
}

// BusyPolling reports whether busy polling is on and, if it was asked for
// but is off, why.
func (s *Socket) BusyPolling() (on bool, note string) { return s.busy, s.busyPollNote }

// Stats are the kernel's per-socket counters (XDP_STATISTICS).
type Stats struct {
	RXDropped            uint64 // frames dropped for reasons other than invalid descriptors
	RXInvalidDescs       uint64 // fill descriptors the kernel refused
	TXInvalidDescs       uint64 // TX descriptors the kernel refused
	RXRingFull           uint64 // frames dropped because the RX ring was full
	RXFillRingEmptyDescs uint64 // times the kernel found the fill ring empty
	TXRingEmptyDescs     uint64 // times the kernel found the TX ring empty
}

// Stats reads the kernel's XDP_STATISTICS.
func (s *Socket) Stats() (Stats, error) {
	st, err := getsockoptStatistics(s.fd)
	if err != nil {
		return Stats{}, fmt.Errorf("xsk: XDP_STATISTICS: %w", err)
	}
	return Stats{
		RXDropped:            st.Rx_dropped,
		RXInvalidDescs:       st.Rx_invalid_descs,
		TXInvalidDescs:       st.Tx_invalid_descs,
		RXRingFull:           st.Rx_ring_full,
		RXFillRingEmptyDescs: st.Rx_fill_ring_empty_descs,
		TXRingEmptyDescs:     st.Tx_ring_empty_descs,
	}, nil
}

// Counters are the socket's own userspace counters. They are plain fields
// updated by the owning goroutine; read them from that goroutine (or after
// it stopped).
type Counters struct {
	RXFrames        uint64 // descriptors received
	RXBadDescs      uint64 // RX descriptors outside the UMEM or our frames (dropped)
	RXWakeups       uint64 // recvfrom calls made to wake or busy-poll RX
	TXSubmitted     uint64 // descriptors submitted to the TX ring
	TXCompleted     uint64 // completions reaped
	TXNoSlots       uint64 // frames a TX burst could not place: TX ring full
	TXNoFrames      uint64 // frames a TX burst could not place: no free frame
	TXTooLong       uint64 // frames longer than a UMEM frame (dropped)
	TXBadDescs      uint64 // TransmitDescs descriptors the kernel would refuse (dropped)
	Kicks           uint64 // sendto calls
	KickTransient   uint64 // sendto/recvfrom answered EAGAIN/EBUSY/ENOBUFS/ENETDOWN/EINTR
	KickErrors      uint64 // other sendto/recvfrom errors
	FreeRejected    uint64 // frames handed back that were not ours or already free
	CompletionsLost uint64 // completions with no submitted frame to match (kernel bug)
}

// Counters returns a copy of the socket's userspace counters.
func (s *Socket) Counters() Counters {
	c := s.counters
	c.FreeRejected = s.alloc.rejected
	return c
}
