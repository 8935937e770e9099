package guestmem

import (
	"errors"
	"fmt"
	"runtime/debug"
)

// ErrFault means touching guest memory faulted: the file behind it was
// truncated (see Protect).
var ErrFault = errors.New("guestmem: fault on guest memory")

// A front-end owns the files behind its guest's memory and can truncate
// one after we mapped it (QEMU seals its memfds, DPDK's virtio-user does
// not): the next touch of a page past the new end raises SIGBUS. Go turns
// that into a recoverable panic only on a goroutine that asked for it with
// debug.SetPanicOnFault. The poll workers run that way for good (the
// switch recovers per burst); code that touches guest memory anywhere else
// (the vhost control goroutine building a ring, rebinding a queue) wraps
// the touch in Protect.

// FaultError is a fault on guest memory, recovered. It wraps ErrFault.
type FaultError struct {
	Addr  uintptr // the faulting host address
	Cause any     // what the runtime panicked with
}

func (e *FaultError) Error() string {
	return fmt.Sprintf("%v at %#x: %v", ErrFault, e.Addr, e.Cause)
}

func (e *FaultError) Unwrap() error { return ErrFault }

// memoryFault is what the runtime panics with on a fault when
// SetPanicOnFault is on: a runtime.Error carrying the address.
type memoryFault interface{ Addr() uintptr }

// FaultAddr is the faulting address of what a recover returned, if it is
// a memory fault (the poll workers, which run with SetPanicOnFault for
// good, recover their own and ask this).
func FaultAddr(r any) (uintptr, bool) {
	f, ok := r.(memoryFault)
	if !ok {
		return 0, false
	}
	return f.Addr(), true
}

// Protect runs fn and returns a *FaultError if fn faulted on an address
// owns says is guest memory. Any other panic, a fault elsewhere included
// (a bug of ours), goes on. fn must leave nothing half-done that matters if
// it stops at any touch of guest memory: the caller treats the error as
// "this guest's memory is gone" and breaks its device.
func Protect(owns func(addr uintptr) bool, fn func()) (err error) {
	old := debug.SetPanicOnFault(true)
	defer debug.SetPanicOnFault(old)
	defer func() {
		r := recover()
		if r == nil {
			return
		}
		if addr, ok := FaultAddr(r); ok && owns(addr) {
			err = &FaultError{Addr: addr, Cause: r}
			return
		}
		panic(r)
	}()
	fn()
	return nil
}
