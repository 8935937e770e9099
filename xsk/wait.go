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
