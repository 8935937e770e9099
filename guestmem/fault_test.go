package guestmem

import (
	"errors"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// truncatedMapping maps a one-page memfd and truncates the file, so that
// reading the page raises SIGBUS.
func truncatedMapping(t *testing.T) []byte {
	t.Helper()
	fd, err := unix.MemfdCreate("guest", unix.MFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	if err := unix.Ftruncate(fd, 4096); err != nil {
		t.Fatal(err)
	}
	b, err := unix.Mmap(fd, 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(b) })
	if err := unix.Ftruncate(fd, 0); err != nil {
		t.Fatal(err)
	}
	return b
}

func TestProtect(t *testing.T) {
	b := truncatedMapping(t)
	base := uintptr(unsafe.Pointer(&b[0]))
	owns := func(a uintptr) bool { return a >= base && a < base+uintptr(len(b)) }
	var sink byte
	err := Protect(owns, func() { sink = b[100] })
	var fe *FaultError
	if !errors.Is(err, ErrFault) || !errors.As(err, &fe) || fe.Addr != base+100 {
		t.Fatalf("fault on a truncated page: %v (sink %d)", err, sink)
	}
	if err := Protect(owns, func() {}); err != nil {
		t.Fatalf("no fault: %v", err)
	}
	// A fault on memory owns does not claim is not recovered.
	func() {
		defer func() {
			if r := recover(); r == nil {
				t.Error("a fault outside guest memory was swallowed")
			}
		}()
		_ = Protect(func(uintptr) bool { return false }, func() { sink = b[0] })
	}()
	// Nor is any other panic.
	func() {
		defer func() {
			if r := recover(); r != "boom" {
				t.Errorf("recovered %v, want the original panic", r)
			}
		}()
		_ = Protect(owns, func() { panic("boom") })
	}()
}
