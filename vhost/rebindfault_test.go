package vhost_test

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"testing"
	"time"
	"unsafe"

	"github.com/xvswitch/xvswitch/vhost"
	"github.com/xvswitch/xvswitch/vhost/vhosttest"
)

// onFaultingThread runs fn on a goroutine that turns faults into panics,
// as the switch's workers do, and returns what fn panicked with (nil if it
// returned).
func onFaultingThread(fn func()) (r any) {
	done := make(chan any)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		debug.SetPanicOnFault(true)
		defer func() { done <- recover() }()
		fn()
	}()
	return <-done
}

// faultInRebind sends a new memory table, truncates it, and returns the
// address the first Begin over it faults on (rebinding the queue there).
func faultInRebind(t *testing.T, s *testSession, q *vhost.Queue) uintptr {
	t.Helper()
	s.f.SetMemTable()
	s.f.TruncateMemory(0)
	r := onFaultingThread(func() { q.Begin() })
	f, ok := r.(interface{ Addr() uintptr })
	if !ok {
		t.Fatalf("Begin over truncated memory: %v, want a memory fault", r)
	}
	return f.Addr()
}

// TestBeginFaultInRebind: the first Begin after a new memory table rebinds
// the queue over it, and the guest truncated that memory. On a goroutine
// that recovers faults, Begin panics with the fault and leaves the queue
// unlocked and bound to nothing: Owns names the memory, the next Begin
// neither faults again nor hands out the half-rebound state, the control
// path (which waits for the poller to let go of the old state) answers at
// once, and the next front-end gets a running queue. The control path
// used to wait releaseTimeout (10 s) for a lock nobody would release, and
// the queue never ran again.
func TestBeginFaultInRebind(t *testing.T) {
	for _, packed := range []bool{true, false} {
		t.Run(fmt.Sprintf("packed=%v", packed), func(t *testing.T) {
			s := startSession(t, vhost.Config{}, packed, vhosttest.DefaultFeatures)
			q := s.d.TxQueue(0)
			if q.Begin() == nil {
				t.Fatal("TX queue not running")
			}
			q.End()
			addr := faultInRebind(t, s, q)
			if !q.Owns(addr) {
				t.Errorf("the queue does not own the faulting address %#x", addr)
			}
			if r := onFaultingThread(func() {
				if q.Begin() != nil {
					q.End()
					t.Error("Begin after the fault handed out the half-rebound state")
				}
			}); r != nil {
				t.Fatalf("Begin after the fault: %v", r)
			}

			start := time.Now()
			s.f.Call(vhosttest.ReqGetVringBase, vhosttest.VringState(1, 0)) // waits for the poller
			if d := time.Since(start); d > time.Second {
				t.Errorf("GET_VRING_BASE took %v after the fault", d)
			}
			s.f.Reconnect()
			vhosttest.WaitFor(t, "ready with the next front-end", func() bool { return s.d.Info().Ready })
			if q.Begin() == nil {
				t.Fatal("TX queue not running for the next front-end")
			}
			q.End()
		})
	}
}

// TestFaultOwnedAfterControlRebind: a burst faults on a guest's memory and
// lets go of the queue on its way out (Abort, or a rebind inside Begin);
// before the worker asks whose memory it was, the control path rebinds the
// queue (the front-end stopped the ring). Owns must still name the memory
// for that fault, once: the worker panicked ("a fault on memory no guest
// owns is a bug of ours") when CI's run lost this race.
func TestFaultOwnedAfterControlRebind(t *testing.T) {
	for _, how := range []string{"rebind", "abort"} {
		t.Run(how, func(t *testing.T) {
			s := startSession(t, vhost.Config{}, true, vhosttest.DefaultFeatures)
			q := s.d.TxQueue(0)
			if q.Begin() == nil {
				t.Fatal("TX queue not running")
			}
			q.End()
			var addr uintptr
			switch how {
			case "rebind":
				addr = faultInRebind(t, s, q)
			case "abort":
				// A burst that faulted on the first byte of the memory.
				a := q.Begin()
				if a == nil {
					t.Fatal("TX queue not running")
				}
				addr = uintptr(unsafe.Pointer(&a.Mem.Regions()[0].Host[0]))
				q.Abort()
			}
			// The control path takes the free lock and rebinds the
			// queue to a stopped ring: boundMem and nextMem go.
			s.f.Call(vhosttest.ReqGetVringBase, vhosttest.VringState(1, 0))
			if !q.Owns(addr) {
				t.Fatalf("after the control path's rebind the queue does not own the faulting address %#x", addr)
			}
			if q.Owns(addr) {
				t.Error("the fault's record was not consumed by the Owns that attributed it")
			}
		})
	}
}
