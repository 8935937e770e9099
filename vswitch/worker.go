package vswitch

import (
	"log/slog"
	"runtime"
	"runtime/debug"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// DefaultIdleAfter is how long a worker's queues must all be empty before
// it stops spinning and sleeps in epoll. Short enough that light traffic
// (a ping a second) costs about 1% of a core, long enough that a busy
// queue never pays the wake-up latency.
const DefaultIdleAfter = 10 * time.Millisecond

// DefaultRxBackoff is Config.RxBackoff's default: about what a guest's
// driver takes to post a few buffers, far shorter than the gap between a
// NIC's bursts at any rate a guest keeps up with (BENCHMARKS.md, "The
// receive back-off").
const DefaultRxBackoff = time.Microsecond

// worker polls its queues in bursts on one locked OS thread.
type worker struct {
	forwarder
	sw        *Switch
	cpu       int // -1: not pinned
	idleAfter time.Duration
	seen      atomic.Uint64 // the snapshot generation it forwards with
	stop      atomic.Bool
	running   atomic.Bool
	wakeFD    int // eventfd: the control plane wakes a sleeping worker
	epfd      int
	wakers    []waker // index = epoll user data - 1 (0 is wakeFD)
	canSleep  bool
	// slept: the ports whose guests touchSafe broke during this sleep
	// (arming, draining, disarming), kept so that their next wake-up
	// call may fault again without taking the worker down.
	slept  []string
	sleeps atomic.Uint64
	// The worker's own timestamps, read by `show workers`, in nanoseconds
	// on the switch's monotonic clock (since Switch.start): when it
	// started, how long it slept in epoll before its last wake-up, and
	// when its current sleep began (0: awake). The clock is read when it
	// goes to sleep and when it wakes, never per frame.
	startedNs atomic.Int64
	idleNs    atomic.Int64
	asleepAt  atomic.Int64
}

// waker is how a polled queue wakes the worker, and the queue: arming,
// disarming and draining it touch the guest's memory too (fault.go).
type waker struct {
	Waker
	in *ingress
}

func newWorker(sw *Switch, id, cpu int, idleAfter time.Duration) (*worker, error) {
	fd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		return nil, err
	}
	w := &worker{forwarder: forwarder{id: id, fdb: sw.fdb}, sw: sw, cpu: cpu, idleAfter: idleAfter, wakeFD: fd, epfd: -1}
	w.fb.worker = id
	return w, nil
}

// wake interrupts the worker's epoll sleep.
func (w *worker) wake() {
	var one = [8]byte{1}
	_, _ = unix.Write(w.wakeFD, one[:])
}

func (w *worker) close() {
	if w.epfd >= 0 {
		unix.Close(w.epfd)
	}
	unix.Close(w.wakeFD)
}

func (w *worker) run(done func()) {
	defer done()
	defer w.running.Store(false)
	// The worker's thread is its own while it runs. A pinned one is never
	// unlocked: a goroutine that ends locked takes its thread with it, so
	// a thread pinned to the worker's CPU does not go back to the
	// runtime's pool, where any goroutine could run on it there.
	runtime.LockOSThread()
	pinned := false
	defer func() {
		if !pinned {
			runtime.UnlockOSThread()
		}
	}()
	// A fault on guest memory (a front-end truncated the file behind it)
	// becomes a panic that forwardSafe recovers, instead of killing the
	// process: see fault.go.
	debug.SetPanicOnFault(true)
	if w.cpu >= 0 {
		var set unix.CPUSet
		set.Set(w.cpu)
		if err := unix.SchedSetaffinity(0, &set); err != nil {
			slog.Warn("worker: cannot pin to CPU", "worker", w.id, "cpu", w.cpu, "err", err)
		} else {
			pinned = true
		}
	}
	var snap *snapshot
	var idleSince time.Time
	empties := 0
	defer func() {
		if snap != nil {
			w.letGo(snap.polls[w.id])
		}
	}()
	for !w.stop.Load() {
		if s := w.sw.snap.Load(); s != snap {
			if snap != nil {
				// A queue it polls no more may be another worker's now,
				// or its port is being closed.
				w.letGo(snap.polls[w.id])
			}
			snap = s
			w.watch(snap.polls[w.id])
			w.seen.Store(snap.gen)
		}
		work := w.pollOnce(snap)
		if work > 0 {
			empties = 0
			continue
		}
		// The idle clock starts at the 64th empty poll in a row, not the
		// first: under load most empty runs are a poll or two between
		// bursts, and a clock read for each cost 1.8% of the worker
		// (VM -> switch, 64 B). 64 polls are microseconds, against
		// --idle-after's milliseconds.
		if empties++; empties%64 != 0 {
			continue
		}
		if empties == 64 {
			idleSince = time.Now()
			continue
		}
		if w.idleAfter >= 0 && time.Since(idleSince) >= w.idleAfter {
			w.sleep(snap)
			empties = 0
		}
	}
}

// pollOnce polls each of the worker's queues for one burst.
func (w *worker) pollOnce(snap *snapshot) int {
	work := 0
	for _, in := range snap.polls[w.id] {
		n, err := w.forwardSafe(snap, in)
		if err != nil {
			in.port.drv.Fail(err)
		}
		work += n
	}
	return work
}

// holder is an ingress queue that keeps something from one burst to the
// next for its poller (a vhost ring's lock: vhost.Queue.Hold), which
// others (the control path) wait for while the worker sleeps or after
// it stopped polling the queue. letGo releases it; the next Receive takes
// it again. It touches no guest memory.
type holder interface{ letGo(worker int) }

// letGo releases what the worker's queues hold across bursts.
func (w *worker) letGo(polls []*ingress) {
	for _, in := range polls {
		if h, ok := in.q.(holder); ok {
			h.letGo(w.id)
		}
	}
}

// watch rebuilds the epoll set for the worker's queues.
func (w *worker) watch(polls []*ingress) {
	if w.epfd >= 0 {
		unix.Close(w.epfd)
	}
	w.wakers = w.wakers[:0]
	w.canSleep = false
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		slog.Warn("worker: epoll unavailable, it will not sleep when idle", "err", err)
		w.epfd = -1
		return
	}
	w.epfd = epfd
	add := func(fd int, data int32) bool {
		ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: data}
		return unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, fd, &ev) == nil
	}
	if !add(w.wakeFD, 0) {
		return
	}
	for _, in := range polls {
		wk := in.q.Waker()
		if wk.FD < 0 || !add(wk.FD, int32(len(w.wakers)+1)) {
			return // a queue that cannot wake us: keep polling
		}
		w.wakers = append(w.wakers, waker{wk, in})
	}
	w.canSleep = true
}

// sleep arms every queue's wake-up, polls once more (a frame may have
// arrived just before arming), and if still nothing, waits in epoll.
func (w *worker) sleep(snap *snapshot) {
	if !w.canSleep {
		return
	}
	// Arming, disarming and draining take a vhost ring as a burst does:
	// the worker holds none of them then (holder).
	w.letGo(snap.polls[w.id])
	w.slept = w.slept[:0]
	for _, wk := range w.wakers {
		w.touchSafe(snap, wk.in, wk.Arm, "arming")
	}
	defer func() {
		w.letGo(snap.polls[w.id])
		for _, wk := range w.wakers {
			w.touchSafe(snap, wk.in, wk.Disarm, "disarming")
		}
	}()
	if w.pollOnce(snap) > 0 || w.stop.Load() || w.sw.snap.Load() != snap {
		return
	}
	// That poll took the vhost rings again: a sleeping worker holds
	// nothing the control path may wait for.
	w.letGo(snap.polls[w.id])
	w.sleeps.Add(1)
	var evs [16]unix.EpollEvent
	asleep := int64(time.Since(w.sw.start))
	w.asleepAt.Store(asleep)
	// No timeout: whatever a sleeping worker must see wakes it. Frames
	// and kicks through its queues' fds; a port added or deleted through
	// wakeFD (publish); a vhost ring started, stopped or rebuilt through
	// the queue's own wake eventfd, which sits in its WaitFD (vhost
	// Queue.publish); an AF_XDP socket replaced through the NIC queue's
	// epoll set (nicQueue.attach). wake_test.go and idlefault_test.go
	// check that each reaches a sleeping worker at once.
	n, err := unix.EpollWait(w.epfd, evs[:], -1)
	awake := time.Since(w.sw.start)
	w.idleNs.Add(int64(awake) - asleep)
	w.asleepAt.Store(0)
	// The FDB clock stood still while everyone slept (housekeep).
	w.sw.clock.Advance(uint32(awake / time.Second))
	w.sw.workerAwake()
	if err != nil {
		return
	}
	for _, ev := range evs[:n] {
		if ev.Fd == 0 {
			var b [8]byte
			_, _ = unix.Read(w.wakeFD, b[:])
			continue
		}
		wk := w.wakers[ev.Fd-1]
		w.touchSafe(snap, wk.in, wk.Drain, "draining its wake-up")
	}
}
