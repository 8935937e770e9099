package xsk

import (
	"errors"
	"fmt"
	"time"

	"golang.org/x/sys/unix"
)

// Wait is the idle mode: it sleeps in poll(2) until the socket has received
// frames (POLLIN) or, when TX frames are outstanding, until the TX ring has
// room (POLLOUT), or until timeout passes (negative: no timeout). It reports
// whether the socket became ready. A socket with a TX ring runs the TX path
// on every poll, so RX-only sockets should be created with NoTX.
//
// For one epoll loop over many sockets and eventfds, use FD() instead.
func (s *Socket) Wait(timeout time.Duration) (bool, error) {
	var ev int16
	if s.rx != nil {
		ev |= unix.POLLIN
	}
	if s.tx != nil && s.fifo.len() > 0 {
		ev |= unix.POLLOUT
	}
	s.pollFDs[0].Events = ev
	s.pollFDs[0].Revents = 0
	ms := -1
	if timeout >= 0 {
		ms = int((timeout + time.Millisecond - 1) / time.Millisecond)
	}
	n, err := unix.Poll(s.pollFDs[:], ms)
	if err != nil {
		if errors.Is(err, unix.EINTR) {
			return false, nil
		}
		return false, fmt.Errorf("xsk: poll: %w", err)
	}
	return n > 0 && s.pollFDs[0].Revents&(ev|unix.POLLERR) != 0, nil
}

// RXReady reports whether received frames are waiting, without taking
// them. The idle protocol: after arming (deciding to sleep), check RXReady
// once more before sleeping, or a frame that arrived in between waits for
// the next one.
func (s *Socket) RXReady() bool {
	return s.rx != nil && s.rx.avail(1) > 0
}

// FillNeedsWakeup reports the fill ring's need_wakeup flag: the driver
// sleeps and Receive (recvfrom) or poll must wake it. Copy mode never sets
// it.
func (s *Socket) FillNeedsWakeup() bool {
	return s.wakeup && s.fill != nil && s.fill.needWakeup()
}

// TXNeedsWakeup reports whether a TX kick is needed for submitted frames to
// move (always in copy mode, and without need_wakeup).
func (s *Socket) TXNeedsWakeup() bool {
	return s.tx != nil && s.needsKick()
}
