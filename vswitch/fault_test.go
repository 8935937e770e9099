package vswitch

import (
	"errors"
	"sync/atomic"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// shrinkingGuest is a port whose frames live in a memfd mapping that its
// "front-end" truncates, as a hostile DPDK virtio-user could: touching the
// frames then raises SIGBUS.
type shrinkingGuest struct {
	fakePort
	mem    []byte
	fd     int
	broken atomic.Value // error
}

func newShrinkingGuest(t *testing.T) *shrinkingGuest {
	fd, err := unix.MemfdCreate("guest", unix.MFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Ftruncate(fd, 1<<16); err != nil {
		t.Fatal(err)
	}
	mem, err := unix.Mmap(fd, 0, 1<<16, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(mem); unix.Close(fd) })
	g := &shrinkingGuest{fakePort: *newFakePort(), mem: mem, fd: fd}
	copy(mem, ethFrame(bcast, 0x0200_0000_0bad, "from a guest about to shrink its memory"))
	return g
}

func (g *shrinkingGuest) IngressQueues() []IngressQueue { return []IngressQueue{g} }

func (g *shrinkingGuest) Receive(fb *Burst, _ *Counts) (int, error) {
	if g.broken.Load() != nil {
		return 0, nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.pending) == 0 {
		return 0, nil
	}
	g.pending = g.pending[1:]
	fb.SetOne(0, g.mem[:60])
	return 1, nil
}

func (g *shrinkingGuest) recoverFault(addr uintptr, err error, _ IngressQueue, _ int) bool {
	base := uintptr(unsafe.Pointer(&g.mem[0]))
	if addr < base || addr-base >= uintptr(len(g.mem)) {
		return false
	}
	g.broken.Store(err)
	return true
}

// TestGuestMemoryFault: a guest truncates the memory behind its frames.
// The worker's fault is recovered, only that guest is broken (with
// ErrGuestMemoryFault), and the switch keeps forwarding for the others.
func TestGuestMemoryFault(t *testing.T) {
	s := startTestSwitch(t, Config{Workers: 1})
	g := newShrinkingGuest(t)
	other, sink := newFakePort(), newFakePort()
	s.addPort("shrinking", g, 0)
	s.addPort("other", other, 0)
	s.addPort("sink", sink, 0)

	g.put(nil) // one frame, forwarded intact
	waitFor(t, "the frame before the shrink", func() bool { return len(sink.frames()) == 1 })

	if err := unix.Ftruncate(g.fd, 0); err != nil {
		t.Fatal(err)
	}
	g.put(nil)
	waitFor(t, "the guest to be broken", func() bool { return g.broken.Load() != nil })
	if err, _ := g.broken.Load().(error); !errors.Is(err, ErrGuestMemoryFault) {
		t.Fatalf("broken with %v", err)
	}
	other.put(ethFrame(bcast, 0x0200_0000_0001, "still forwarding"))
	waitFor(t, "forwarding after the fault", func() bool { return len(sink.frames()) == 2 })
}
