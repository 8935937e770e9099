package drivertest

import (
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/xvswitch/xvswitch/guestmem"
)

// NewSharedMem is NewMem over memfds mapped MAP_SHARED instead of anonymous
// private memory, so that a test playing a vhost-user front-end can hand
// the regions to a back-end with SCM_RIGHTS, as QEMU does with
// memory-backend-memfd. fds[i] backs region i from file offset 0; the
// caller owns and closes them (Close only unmaps).
func NewSharedMem(sizes ...uint64) (m *Mem, fds []int, err error) {
	return NewSharedMemAt(0, sizes...)
}

// NewSharedMemAt is NewSharedMem with every region at file offset off of
// its memfd, as QEMU places the regions of one memory backend after the
// first (the file is sparse before off). off need not be page aligned: the
// front-end maps from the page below it, as a back-end must.
func NewSharedMemAt(off uint64, sizes ...uint64) (m *Mem, fds []int, err error) {
	m = &Mem{}
	defer func() {
		if err != nil {
			m.Close()
			for _, fd := range fds {
				_ = unix.Close(fd)
			}
			m, fds = nil, nil
		}
	}()
	pg := uint64(unix.Getpagesize())
	start := off &^ (pg - 1)
	for i, sz := range sizes {
		fd, err := unix.MemfdCreate(fmt.Sprintf("drivertest-guest-%d", i), unix.MFD_CLOEXEC)
		if err != nil {
			return m, fds, err
		}
		fds = append(fds, fd)
		if err := unix.Ftruncate(fd, int64(off+sz)); err != nil {
			return m, fds, err
		}
		b, err := unix.Mmap(fd, int64(start), int(off-start+sz), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
		if err != nil {
			return m, fds, err
		}
		m.maps = append(m.maps, b)
		gpa := uint64(i+1) << 30
		host := b[off-start:]
		m.Regions = append(m.Regions, guestmem.Region{GuestAddr: gpa, Size: sz, UserAddr: gpa + UserOffset, Host: host})
		m.next = append(m.next, gpa)
	}
	m.Memory, err = guestmem.New(m.Regions)
	return m, fds, err
}
