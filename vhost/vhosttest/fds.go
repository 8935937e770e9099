package vhosttest

import (
	"testing"

	"golang.org/x/sys/unix"
)

// EventFD returns a new non-blocking eventfd, as QEMU makes for kicks and
// calls; the caller closes it. Hostile tests send it where the device
// expects none, or for a vring that does not exist.
func EventFD(t testing.TB) int {
	t.Helper()
	fd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		t.Fatal(err)
	}
	return fd
}

// MemFD returns a new memfd of size bytes; the caller closes it. Hostile
// tests offer it as a region it cannot back, or one that overlaps another.
func MemFD(t testing.TB, size int64) int {
	t.Helper()
	fd, err := unix.MemfdCreate("vhosttest", unix.MFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Ftruncate(fd, size); err != nil {
		t.Fatal(err)
	}
	return fd
}

// FullEventFD returns a new blocking eventfd whose counter is at its
// maximum, 0xfffffffffffffffe, as a hostile front-end hands over for the
// device to write: adding even 1 blocks until someone reads it. The
// caller closes it.
func FullEventFD(t testing.TB) int {
	t.Helper()
	fd, err := unix.Eventfd(0, unix.EFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	FillEventFD(t, fd)
	return fd
}

// FillEventFD adds to the eventfd fd what brings an empty counter to its
// maximum.
func FillEventFD(t testing.TB, fd int) {
	t.Helper()
	var b [8]byte
	le.PutUint64(b[:], 0xffff_ffff_ffff_fffe)
	if _, err := unix.Write(fd, b[:]); err != nil {
		t.Fatal(err)
	}
}
