package vhost

import (
	"fmt"
	"strconv"

	"golang.org/x/sys/unix"
)

// eventfdLink is what /proc/self/fd/N links to for an eventfd: an
// anonymous inode's name, which no path on a file system can have (a
// file's link is absolute, and a deleted one ends in " (deleted)").
const eventfdLink = "anon_inode:[eventfd]"

// checkEventFD refuses an fd that is not an eventfd. The kick, call and
// error fds of a vring are written and read on the device's behalf; an
// eventfd is the one kind whose reads and writes never block on a
// well-behaved peer and whose blocking the Notifier and the kick read are
// built to survive (a full counter, O_NONBLOCK cleared). A pipe, a socket
// or a FIFO can block in ways nothing here bounds, so they are refused
// whatever the front-end meant by them.
func checkEventFD(fd int) error {
	var buf [64]byte
	n, err := unix.Readlink("/proc/self/fd/"+strconv.Itoa(fd), buf[:])
	if err != nil {
		return fmt.Errorf("cannot tell what fd %d is: %w", fd, err)
	}
	if link := string(buf[:n]); link != eventfdLink {
		return fmt.Errorf("fd is %s, not an eventfd", link)
	}
	return nil
}
