package virtionet

import (
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// caller signals the guest through its call eventfd (vhost-user
// SET_VRING_CALL). The fd is set from the vhost goroutine while the worker
// runs, hence the atomic; -1 means none (the guest polls, or no fd yet).
type caller struct {
	fd  atomic.Int32
	one [8]byte // the eventfd increment, 1 in host byte order (little-endian)
}

func (c *caller) init() {
	c.fd.Store(-1)
	c.one[0] = 1
}

// signal writes the eventfd once. An error (EAGAIN on a saturated counter,
// EBADF on a closed fd) is ignored: the guest is interrupted already, or the
// device is going away.
func (c *caller) signal() bool {
	fd := c.fd.Load()
	if fd < 0 {
		return false
	}
	_, _ = unix.Write(int(fd), c.one[:])
	return true
}
