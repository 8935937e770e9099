package vswitch

import (
	"sync"

	"golang.org/x/sys/unix"
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

func (f *fakePort) rxQueues() []rxQueue { return []rxQueue{f} }
func (f *fakePort) txQueues() []txQueue { return []txQueue{fakeTx{f}} }
func (f *fakePort) info() PortInfo      { return PortInfo{Kind: "fake", State: "ready", Queues: 1} }
func (f *fakePort) fail(err error)      { f.failed = err }
func (f *fakePort) close() error {
	f.closed = true
	unix.Close(f.kick)
	return nil
}

func (f *fakePort) receive(fb *frameBurst, _ *burstCounts) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := min(len(f.pending), MaxBurst)
	for i := 0; i < n; i++ {
		fb.setOne(i, f.pending[i])
	}
	f.pending = f.pending[n:]
	f.held = n
	return n, nil
}

func (f *fakePort) release(fb *frameBurst) error {
	f.held = 0
	return nil
}

func (f *fakePort) waker() waker {
	return waker{
		fd:     f.kick,
		arm:    func() { f.mu.Lock(); f.armed = true; f.mu.Unlock() },
		disarm: func() { f.mu.Lock(); f.armed = false; f.mu.Unlock() },
		drain:  func() { var b [8]byte; unix.Read(f.kick, b[:]) },
	}
}

type fakeTx struct{ f *fakePort }

func (t fakeTx) transmit(fb *frameBurst, mask frameMask, c *burstCounts) {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	for i := 0; i < MaxBurst; i++ {
		if mask&(1<<i) == 0 {
			continue
		}
		fr := &fb.f[i]
		if t.f.room == 0 {
			c.drop(DropNoRxBuffers)
			continue
		}
		if t.f.room > 0 {
			t.f.room--
		}
		b := make([]byte, fr.len)
		fr.copyTo(b)
		t.f.got = append(t.f.got, b)
		c.packets++
		c.bytes += uint64(fr.len)
	}
}
