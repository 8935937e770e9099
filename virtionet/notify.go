package virtionet

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// Interrupts go through a Notifier, never straight from the worker: a
// front-end chooses the eventfds the guest is signalled on, and a write can
// block on one of them whatever the worker does. An eventfd write blocks
// while the counter would pass 0xfffffffffffffffe, and the front-end can
// fill the counter; whether it blocks or fails with EAGAIN depends on
// O_NONBLOCK, a flag of the open file, which the front-end shares and can
// clear at any time after handing the fd over. No check before the write
// closes that race, so the write is made where blocking costs nothing but
// that device's own interrupts: the Notifier's goroutine, one per device
// (per vhost-user session). The worker only raises a line's flag and wakes
// the goroutine through an eventfd of the Notifier's own, which nobody else
// holds; it never waits.
//
// The goroutine sleeps in a plain read of that eventfd, on a thread of its
// own. Waiting in the runtime's poller instead (an os.File) would cost no
// thread, but measured with a goroutine spinning on one of two Ps (as a
// worker does) the wake-ups came ~11ms late, the pace of sysmon's own look
// at the poller, against tens of microseconds for the thread
// (TestSignalAllocs waits for every interrupt: 11s against 40ms).
//
// A flag raised again before the goroutine got to it is one interrupt
// (coalescing, as the guest asked for at least one), and one raised while
// the goroutine was stuck is written once it gets through: the guest gets
// the interrupt late, never not at all.

// NotifierConfig says what a Notifier serves.
type NotifierConfig struct {
	// Lines is how many eventfds it writes (a vhost device: a call and
	// an error eventfd per virtqueue).
	Lines int
	// StallAfter is how long a write may block before Stalled is called
	// (default 1s). A write blocks only on an eventfd whose counter is at
	// its maximum, which no guest reaches by interrupts: the front-end
	// filled it and does not read it.
	StallAfter time.Duration
	// Stalled, if set, is called once (from a goroutine of its own) when
	// a write has blocked for StallAfter on line's eventfd and the
	// eventfd is still full, so the owner can break the device.
	Stalled func(line int)
}

// Notifier writes a device's notification eventfds from a goroutine of
// its own. Line.Signal may be called from any goroutine and never blocks;
// Line.SetFD and Close are the owner's.
type Notifier struct {
	cfg   NotifierConfig
	lines []Line

	// wakeFD is our own eventfd, blocking, for the goroutine to sleep on.
	// Only poke and Close write it, 1 at a time and only while no
	// wake-up is pending, so its counter stays tiny and the write never
	// blocks.
	wakeFD int
	woken  atomic.Bool
	buf    [8]byte // the goroutine's read of wakeFD

	// mu orders closing a line's fd against reading the fd being written
	// (a steal or the stall check): an fd number is only used while mu
	// shows it is still open, so a closed and reused number is never
	// touched.
	mu          sync.Mutex
	closing     atomic.Bool
	closed      bool         // the goroutine has closed every fd (under mu)
	writing     atomic.Int32 // the fd being written, -1 when none
	writingLine atomic.Int32
	watch       *time.Timer // armed while a round writes, for Stalled
	stalledOnce atomic.Bool
	done        chan struct{}
}

// Line is one eventfd a Notifier writes: a queue's call eventfd, say.
type Line struct {
	n       *Notifier
	has     atomic.Bool // an fd is set: Signal has something to do
	pending atomic.Bool // an interrupt is owed

	changed atomic.Bool // next holds an fd handed over (under n.mu)
	next    int
	fd      int // the goroutine's: the fd it writes, -1 for none
}

// one is the eventfd increment, 1 in host byte order (little-endian).
var one = [8]byte{1}

// NewNotifier starts a Notifier with cfg.Lines lines, none with an fd yet.
func NewNotifier(cfg NotifierConfig) (*Notifier, error) {
	if cfg.StallAfter <= 0 {
		cfg.StallAfter = time.Second
	}
	fd, err := unix.Eventfd(0, unix.EFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("virtionet: notifier eventfd: %w", err)
	}
	n := &Notifier{cfg: cfg, lines: make([]Line, cfg.Lines), wakeFD: fd, done: make(chan struct{})}
	for i := range n.lines {
		n.lines[i] = Line{n: n, next: -1, fd: -1}
	}
	n.writing.Store(-1)
	n.watch = time.AfterFunc(time.Hour, n.checkStall)
	n.watch.Stop()
	go n.run()
	return n, nil
}

// Line returns line i, stable for the Notifier's life.
func (n *Notifier) Line(i int) *Line { return &n.lines[i] }

// SetFD hands fd to the line (-1: none, the guest wants no interrupts):
// the Notifier owns it from now on and closes it when it is replaced or
// the Notifier is closed, whether or not a write on it still blocks.
func (l *Line) SetFD(fd int) {
	n := l.n
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed || n.closing.Load() {
		closeFD(fd)
		return
	}
	if l.changed.Load() && l.next != fd {
		closeFD(l.next) // handed over, never taken: never written either
	}
	l.next = fd
	l.changed.Store(true)
	l.has.Store(fd >= 0)
	n.poke()
}

// Signal asks for an interrupt on the line and reports whether the line
// has an fd to send it on. It never blocks and does not allocate; the
// write happens on the Notifier's goroutine. Not after Close.
func (l *Line) Signal() bool {
	if l == nil || !l.has.Load() {
		return false
	}
	if !l.pending.Load() {
		l.pending.Store(true)
		l.n.poke()
	}
	return true
}

// poke wakes the goroutine unless a wake-up is already on its way.
func (n *Notifier) poke() {
	if n.woken.Load() || n.woken.Swap(true) {
		return
	}
	_, _ = unix.Write(n.wakeFD, one[:])
}

// Close stops the Notifier: the goroutine writes what is owed and exits,
// closing every fd it holds. A write that blocks is freed by reading (and
// so clearing) that eventfd's counter, again for a while if the front-end
// keeps filling it. Close does not wait. No Signal may follow it.
func (n *Notifier) Close() {
	n.mu.Lock()
	if n.closed || n.closing.Load() {
		n.mu.Unlock()
		return
	}
	n.closing.Store(true)
	n.stealLocked()
	_, _ = unix.Write(n.wakeFD, one[:])
	n.mu.Unlock()
	go n.reap()
}

// Done is closed when the goroutine has exited and closed every fd.
func (n *Notifier) Done() <-chan struct{} { return n.done }

func (n *Notifier) run() {
	runtime.LockOSThread()
	defer n.exit()
	for {
		if _, err := unix.Read(n.wakeFD, n.buf[:]); err != nil && err != unix.EINTR {
			return
		}
		n.woken.Store(false)
		n.round()
		if n.closing.Load() {
			return
		}
	}
}

// round writes every line that is owed an interrupt, taking over fds
// handed to it first.
func (n *Notifier) round() {
	armed := false
	for i := range n.lines {
		l := &n.lines[i]
		if l.changed.Load() {
			n.install(l)
		}
		if !l.pending.Load() || !l.pending.Swap(false) || l.fd < 0 {
			continue
		}
		if !armed {
			n.watch.Reset(n.cfg.StallAfter)
			armed = true
		}
		n.writingLine.Store(int32(i))
		n.writing.Store(int32(l.fd))
		// EAGAIN (a nonblocking eventfd at its maximum: the guest has an
		// interrupt pending anyway) and EBADF are nothing to act on.
		_, _ = unix.Write(l.fd, one[:])
		n.writing.Store(-1)
	}
	if armed {
		n.watch.Stop()
	}
}

// install takes over the fd handed to l, closing the one it replaces.
func (n *Notifier) install(l *Line) {
	n.mu.Lock()
	fd := l.next
	l.next = -1
	l.changed.Store(false)
	if l.fd != fd {
		closeFD(l.fd)
	}
	l.fd = fd
	n.mu.Unlock()
}

func (n *Notifier) exit() {
	n.mu.Lock()
	for i := range n.lines {
		l := &n.lines[i]
		if l.changed.Load() && l.next != l.fd {
			closeFD(l.next)
		}
		closeFD(l.fd)
		l.fd, l.next = -1, -1
		l.has.Store(false)
	}
	n.closed = true
	// Under mu: Close writes wakeFD under mu, and only before this.
	closeFD(n.wakeFD)
	n.mu.Unlock()
	n.watch.Stop()
	close(n.done)
}

// checkStall runs when a round has written for StallAfter: if a write is
// still blocked on a full eventfd, the line has stalled; if it is only
// slow (the goroutine was not scheduled), look again later.
func (n *Notifier) checkStall() {
	n.mu.Lock()
	fd, line := n.writing.Load(), n.writingLine.Load()
	stuck := fd >= 0 && !n.closed && !writable(int(fd))
	n.mu.Unlock()
	switch {
	case stuck:
		if n.cfg.Stalled != nil && n.stalledOnce.CompareAndSwap(false, true) {
			n.cfg.Stalled(int(line))
		}
	case fd >= 0:
		n.watch.Reset(n.cfg.StallAfter)
	}
}

// stealLocked clears the counter of the eventfd being written, which lets
// a blocked write through. Only after Close: the guest's pending
// interrupts on it no longer matter. Called with n.mu held.
func (n *Notifier) stealLocked() {
	if fd := n.writing.Load(); fd >= 0 && !n.closed {
		_, _ = ReadEventFD(int(fd))
	}
}

// reapFor bounds how long Close goes on freeing blocked writes: a
// front-end that refills its eventfd for longer keeps the goroutine (and
// the fds it holds) until it stops.
const reapFor = 10 * time.Second

func (n *Notifier) reap() {
	deadline := time.Now().Add(reapFor)
	for wait := 100 * time.Microsecond; time.Now().Before(deadline); wait = min(2*wait, 50*time.Millisecond) {
		select {
		case <-n.done:
			return
		case <-time.After(wait):
		}
		n.mu.Lock()
		n.stealLocked()
		n.mu.Unlock()
	}
}

// writable reports whether a write of 1 to the eventfd fd would go
// through now.
func writable(fd int) bool {
	p := [1]unix.PollFd{{Fd: int32(fd), Events: unix.POLLOUT}}
	n, err := unix.Poll(p[:], 0)
	return err == nil && n == 1 && p[0].Revents&unix.POLLOUT != 0
}

// ReadEventFD reads and clears the counter of the eventfd fd without ever
// blocking, whatever O_NONBLOCK says (the front-end that shares the open
// file can clear it): preadv2 with RWF_NOWAIT, which eventfd honours since
// Linux 5.12. On older kernels it falls back to a poll before the read,
// which a front-end reading the same eventfd in between could still make
// block. It returns the counter, 0 when it was zero.
func ReadEventFD(fd int) (uint64, error) {
	var b [8]byte
	n, err := preadv2NoWait(fd, b[:])
	switch err {
	case nil:
	case unix.EAGAIN:
		return 0, nil
	case unix.EOPNOTSUPP, unix.EINVAL, unix.ENOSYS:
		p := [1]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		if k, perr := unix.Poll(p[:], 0); perr != nil || k == 0 {
			return 0, perr
		}
		if n, err = unix.Read(fd, b[:]); err != nil {
			return 0, err
		}
	default:
		return 0, err
	}
	if n != len(b) {
		return 0, nil
	}
	return binary.LittleEndian.Uint64(b[:]), nil
}

func closeFD(fd int) {
	if fd >= 0 {
		_ = unix.Close(fd)
	}
}
