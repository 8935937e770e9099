package xsk

// Test-only unsafe: mapping two memfds back to back into one reserved
// range, the way a VM's memory regions are laid out contiguously for a
// zero-copy UMEM. Invariants: the range is reserved (PROT_NONE) first, so
// MAP_FIXED only replaces our own reservation; the result is unmapped at
// cleanup and never used after.

import (
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// mapTwoMemfds returns 2*half bytes: two memfds of half bytes each,
// MAP_SHARED, contiguous in the address space.
func mapTwoMemfds(t testing.TB, half int) []byte {
	t.Helper()
	res, err := unix.Mmap(-1, 0, 2*half, unix.PROT_NONE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_NORESERVE)
	if err != nil {
		t.Fatal(err)
	}
	base := unsafe.Pointer(&res[0])
	for i := range 2 {
		fd, err := unix.MemfdCreate("xsk-test-guest", unix.MFD_CLOEXEC)
		if err != nil {
			t.Fatal(err)
		}
		if err := unix.Ftruncate(fd, int64(half)); err != nil {
			t.Fatal(err)
		}
		at := unsafe.Add(base, i*half)
		if _, err := unix.MmapPtr(fd, 0, at, uintptr(half), unix.PROT_READ|unix.PROT_WRITE,
			unix.MAP_SHARED|unix.MAP_FIXED|unix.MAP_POPULATE); err != nil {
			t.Fatal(err)
		}
		unix.Close(fd) // the mapping keeps the memfd alive
	}
	t.Cleanup(func() { _ = unix.Munmap(res) })
	return res
}
