package vswitch

import (
	"sync"

	"golang.org/x/sys/unix"

	"github.com/xvswitch/xvswitch/ctl"
)

// fakePort is a port driver for tests: frames put into it appear on its
// receive queue, frames transmitted to it are recorded.
type fakePort struct {
	mu      sync.Mutex
	pending [][]byte // frames waiting to be received
	got     [][]byte // frames transmitted to it
	held    int      // received, not yet released
	room    int      // how many frames transmit accepts before dropping (-1: unlimited)
	kick    int      // eventfd
	armed   bool
	failed  error
	closed  bool
}

func newFakePort() *fakePort {
	fd, _ := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	return &fakePort{room: -1, kick: fd}
}

func (f *fakePort) put(frames ...[]byte) {
	f.mu.Lock()
	f.pending = append(f.pending, frames...)
	armed := f.armed
	f.mu.Unlock()
	if armed {
		unix.Write(f.kick, []byte{1, 0, 0, 0, 0, 0, 0, 0})
	}
}

func (f *fakePort) frames() [][]byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([][]byte(nil), f.got...)
}

func (f *fakePort) IngressQueues() []IngressQueue { return []IngressQueue{f} }
func (f *fakePort) EgressQueues() []EgressQueue   { return []EgressQueue{fakeTx{f}} }
func (f *fakePort) Info() ctl.PortInfo            { return ctl.PortInfo{Kind: "fake", State: "ready", Queues: 1} }
func (f *fakePort) Fail(err error)                { f.failed = err }
func (f *fakePort) Close() error {
	f.closed = true
	unix.Close(f.kick)
	return nil
}

func (f *fakePort) Receive(fb *Burst, _ *Counts) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := min(len(f.pending), MaxBurst)
	for i := 0; i < n; i++ {
		fb.SetOne(i, f.pending[i])
	}
	f.pending = f.pending[n:]
	f.held = n
	return n, nil
}

func (f *fakePort) Release(fb *Burst) error {
	f.held = 0
	return nil
}

func (f *fakePort) Waker() Waker {
	return Waker{
		FD:     f.kick,
		Arm:    func() { f.mu.Lock(); f.armed = true; f.mu.Unlock() },
		Disarm: func() { f.mu.Lock(); f.armed = false; f.mu.Unlock() },
		Drain:  func() { var b [8]byte; unix.Read(f.kick, b[:]) },
	}
}

type fakeTx struct{ f *fakePort }

func (t fakeTx) Transmit(fb *Burst, mask Mask, c *Counts) {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	for m := mask; m != 0; m &= m - 1 {
		fr := fb.Frame(m.Lowest())
		if t.f.room == 0 {
			c.Drop(DropNoRxBuffers)
			continue
		}
		if t.f.room > 0 {
			t.f.room--
		}
		b := make([]byte, fr.Len())
		fr.CopyTo(b)
		t.f.got = append(t.f.got, b)
		c.Frame(fr.Len())
	}
}
