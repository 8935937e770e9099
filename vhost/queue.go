package vhost

import (
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/xvswitch/xvswitch/guestmem"
	"github.com/xvswitch/xvswitch/virtionet"
	"github.com/xvswitch/xvswitch/virtq"
)

// Queue is the stable handle of one virtqueue of a Device, valid for the
// life of the Device. The data path brackets each burst with Begin and End;
// in between it owns the Active that Begin returned. The control path
// swaps what Begin returns (ring started or stopped, memory table replaced,
// eventfds replaced) and, before it unmaps memory or closes fds the old
// Active used, makes sure no burst still runs on it.
//
// Begin/End pairs must not overlap or run concurrently: one burst at a time
// per Queue (several workers may take turns under their own lock, as the
// switch does for transmit queues). The one poller of a queue may instead
// Hold it across bursts and Let it go when it pauses (Hold).
type Queue struct {
	dev   *Device
	index int

	cur atomic.Pointer[snapshot]
	// lock is a try-lock per burst: 0 free, 1 held by a burst (or by a
	// poller across bursts: Hold), 2 held by the control path while it
	// rebinds the queue. A burst never waits for it; the control path
	// waits at most one burst, or for a holding poller's next Hold, which
	// rebinds the queue itself.
	lock  atomic.Uint32
	bound *snapshot // the snapshot the net queue is bound to (under lock)
	// holder is the poller holding lock across bursts (Hold), + 1; 0:
	// none. Written by the lock's holder only.
	holder   atomic.Int64
	boundGen atomic.Uint64 // bound.gen, for the control path to poll
	gen      uint64        // control-owned: last generation published
	// The guest memory of the bound snapshot and, while a rebind runs,
	// of the one it binds: what the holder of the lock may touch, for
	// Owns. Written under the lock, read by anyone.
	boundMem, nextMem atomic.Pointer[guestmem.Memory]
	// faulted is the guest memory a burst or rebind may have touched
	// when a fault interrupted it, recorded before the lock is let go
	// (Abort, rebindOrAbandon): once the lock is free, the control path
	// may rebind the queue and replace boundMem and nextMem before the
	// faulting worker has asked Owns whose memory it was. The first Owns
	// that finds the address in it consumes it (faultowner.go).
	faulted atomic.Pointer[faultedMem]

	// epfd is an epoll instance holding the current kick eventfd and
	// wakefd; a poller adds epfd to its own epoll set, and it stays the
	// same fd however often the front-end replaces the kick eventfd.
	epfd    int
	wakefd  int
	curKick int // control-owned: the kick fd registered in epfd, or -1

	ctl queueCtl // control-owned ring setup, guarded by the device's mutex

	// The virtio-net queue of the current session (one of the two), for
	// Stats; set by the control path when it creates one.
	rx atomic.Pointer[virtionet.RxQueue]
	tx atomic.Pointer[virtionet.TxQueue]
}

// snapshot is what Begin sees: immutable once published.
type snapshot struct {
	gen uint64
	act *Active // nil when the queue is not running
}

// Active is a running virtqueue as the data path sees it between Begin and
// End: a started and enabled ring over the current memory table, and the
// virtio-net queue over it. Its fields are read-only; Ring, Rx and Tx are
// owned by the burst between Begin and End.
type Active struct {
	// Rx is set on the guest's receive queues (even indexes): Deliver
	// copies frames into the guest.
	Rx *virtionet.RxQueue
	// Tx is set on the guest's transmit queues (odd indexes): Receive
	// presents the frames the guest sent, Complete gives them back.
	Tx *virtionet.TxQueue
	// Ring is the device side of the virtqueue (packed or split), for
	// EnableKicks/DisableKicks; Rx and Tx do the rest.
	Ring virtq.Ring
	// Mem is the guest memory table the ring translates through; its host
	// slices are valid until End.
	Mem *guestmem.Memory
	// Features is the negotiated virtio feature word.
	Features uint64
	// Index is the virtqueue index: 2*pair for RX, 2*pair+1 for TX.
	Index int

	q       *Queue
	session uint64
	kickFD  int // -1: the front-end never kicks (poll mode)
}

// Begin starts a burst on the queue and returns its running state, or nil
// when the queue is not running or is being reconfigured right now (then
// the burst is skipped, and End must not be called). Every non-nil Begin
// must be followed by End. It does not allocate.
//
// The first Begin after a change rebinds the queue, which touches guest
// memory (the old ring is flushed, the new one told not to kick). A caller
// running with debug.SetPanicOnFault (the switch's workers) may see that
// fault as a panic out of Begin: the queue is then left unlocked and bound
// to nothing running, and the caller breaks the device (Owns tells whose
// memory faulted).
func (q *Queue) Begin() *Active {
	if !q.lock.CompareAndSwap(0, 1) {
		return nil
	}
	s := q.cur.Load()
	if s != q.bound {
		q.rebindOrAbandon(s)
	}
	if s.act == nil {
		q.lock.Store(0)
		return nil
	}
	return s.act
}

// Hold is Begin for the poller of a queue, which keeps the queue's lock
// from one burst to the next instead of taking and releasing it per
// burst: a poll of a queue it holds is two loads (who holds it, the
// published snapshot) and a compare, no atomic read-modify-write and no
// store, on every empty poll too. poller names the caller (a worker
// number, the same for all its calls); a queue may move from one poller
// to another, and another's hold is never taken for one's own. It
// returns nil when the queue is not running or someone else holds it
// (then the caller holds nothing). What Begin carries, Hold carries the
// same way: the first Hold after a change rebinds the queue (the
// memory-table handoff; the control path, waiting in waitRelease, relies
// on that while the queue is held), a rebind that faults leaves the queue
// unlocked and bound to nothing running, and Owns names the memory a
// held burst may touch.
//
// A poller must Let go of a queue it holds whenever it may stop calling
// Hold for a while: before it sleeps (and so before Arm, Disarm and
// Drain), when it stops polling the queue, when it exits, and after a
// fault in a burst on it. End is not called after Hold.
func (q *Queue) Hold(poller int) *Active {
	me := int64(poller) + 1
	if q.holder.Load() != me {
		if !q.lock.CompareAndSwap(0, 1) {
			return nil
		}
		q.holder.Store(me)
	}
	s := q.cur.Load()
	if s != q.bound {
		q.holder.Store(0) // a rebind that panics unlocks on its way out
		q.rebindOrAbandon(s)
		q.holder.Store(me)
	}
	if s.act == nil {
		q.Let(poller) // not running: the control path may want the lock
		return nil
	}
	return s.act
}

// Let releases the queue if poller holds it (Hold).
func (q *Queue) Let(poller int) {
	if q.holder.Load() == int64(poller)+1 {
		q.holder.Store(0)
		q.lock.Store(0)
	}
}

// End finishes the burst of a non-nil Begin. Complete every TX burst and
// finish every Deliver before End: the ring may be rebuilt (new memory
// table) or stopped (GET_VRING_BASE) as soon as End returns.
func (q *Queue) End() { q.lock.Store(0) }

// Abort ends the burst of a non-nil Begin that a fault interrupted (a
// deferred call on the way out of the panic): as End, and Owns goes on
// naming the memory the burst could touch until the fault is attributed,
// whatever the control path rebinds meanwhile.
func (q *Queue) Abort() {
	q.noteFault()
	q.End()
}

// rebindOrAbandon is Begin's rebind. If the rebind panics (a fault on a
// truncated guest memory, on a goroutine with SetPanicOnFault), the queue
// is bound to a snapshot with nothing running and unlocked on the way out,
// so that neither a later Begin nor the control path, waiting for the
// poller to let go of the old snapshot, depends on the half-done rebind
// or on a lock nobody will release. The panic goes on to the caller.
func (q *Queue) rebindOrAbandon(s *snapshot) {
	done := false
	defer func() {
		if !done {
			q.noteFault()
			q.abandon(s)
			q.lock.Store(0)
		}
	}()
	q.rebind(s)
	done = true
}

// abandon binds the queue (its lock held) to an empty snapshot of s's
// generation, without touching guest memory: the old snapshot and s are
// released as far as the data path goes, and s stops being what Begin
// finds unless the control path published something newer meanwhile.
// boundMem and nextMem are kept: they say whose memory faulted.
func (q *Queue) abandon(s *snapshot) {
	dead := &snapshot{gen: s.gen}
	q.cur.CompareAndSwap(s, dead)
	q.bound = dead
	q.boundGen.Store(dead.gen)
}

// rebind moves the queue's virtio-net state from the snapshot it was bound
// to onto s. Called with the lock held, by the first Begin after a publish
// or by the control path if no burst comes. The old snapshot's memory and
// fds are still valid here (the control path frees them only after the
// rebind), so RX buffers held over are given back to the guest first.
func (q *Queue) rebind(s *snapshot) {
	var next *guestmem.Memory
	if s.act != nil {
		next = s.act.Mem
	}
	q.nextMem.Store(next)
	if old := q.bound; old != nil && old.act != nil {
		if a := old.act; a.Rx != nil {
			_ = a.Rx.Flush()
		} else if a.Tx != nil {
			_ = a.Tx.Complete()
		}
	}
	if a := s.act; a != nil {
		// Until a poller goes idle and arms them, kicks are noise.
		a.Ring.DisableKicks()
		if a.Rx != nil {
			a.Rx.Reset(a.Ring)
		} else {
			a.Tx.Reset(a.Ring)
		}
	}
	q.bound = s
	q.boundGen.Store(s.gen)
	q.boundMem.Store(next)
	q.nextMem.Store(nil)
}

// Owns reports whether host address addr lies in guest memory a burst on
// this queue may touch: the memory of the running state it is bound to
// or, during a rebind, of the one it binds. After a fault it still names
// the memory that faulted, until the next rebind. Safe from any goroutine:
// a poller that faulted may ask queues other pollers own.
func (q *Queue) Owns(addr uintptr) bool {
	for _, m := range [2]*guestmem.Memory{q.boundMem.Load(), q.nextMem.Load()} {
		if m != nil && m.ContainsHost(addr) {
			return true
		}
	}
	return q.ownsFaulted(addr)
}

// Receiver is the queue's current virtio-net receive side (nil on a
// transmit queue or before the first front-end), for AbandonLent, which
// is safe from any goroutine; everything else on it belongs to bursts.
func (q *Queue) Receiver() *virtionet.RxQueue { return q.rx.Load() }

// Transmitter is the queue's current virtio-net transmit side (nil on a
// receive queue or before the first front-end), for AbandonHeld and Held,
// which are safe from any goroutine; everything else on it belongs to
// bursts.
func (q *Queue) Transmitter() *virtionet.TxQueue { return q.tx.Load() }

// Running reports whether Begin would find the queue running now (a
// started and enabled ring over a memory table). A hint for choosing
// among queues: the answer may change at any time, and Begin decides.
func (q *Queue) Running() bool { return q.cur.Load().act != nil }

// WaitFD is a file descriptor (an epoll instance) that becomes readable
// when the guest kicks this queue or when the queue's state changes
// (started, stopped, memory replaced). A poller adds it to its own epoll
// set (level-triggered) and calls Drain after waking. It stays valid until
// the Device is closed.
func (q *Queue) WaitFD() int { return q.epfd }

// Index returns the virtqueue index (2*pair for RX, 2*pair+1 for TX).
func (q *Queue) Index() int { return q.index }

// Arm asks the guest to kick this queue when it adds buffers; a poller
// calls it before sleeping on WaitFD and then polls once more. Not inside
// a Begin/End pair. Arm, Disarm and Drain write the guest's ring (or
// rebind it) like a burst, and end their burst even if that faults (see
// Begin).
func (q *Queue) Arm() {
	if a := q.Begin(); a != nil {
		ok := false
		defer q.EndBurst(&ok)
		a.Ring.EnableKicks()
		ok = true
	}
}

// Disarm asks the guest to stop kicking (the poller is busy polling). Not
// inside a Begin/End pair.
func (q *Queue) Disarm() {
	if a := q.Begin(); a != nil {
		ok := false
		defer q.EndBurst(&ok)
		a.Ring.DisableKicks()
		ok = true
	}
}

// Drain consumes pending kicks and state-change wake-ups so that WaitFD
// stops being readable. Not inside a Begin/End pair.
func (q *Queue) Drain() {
	var b [8]byte
	_, _ = unix.Read(q.wakefd, b[:])
	if a := q.Begin(); a != nil {
		defer q.End()
		if a.kickFD >= 0 {
			// Never a plain read: the front-end can clear O_NONBLOCK
			// on the kick eventfd (the flag is the open file's, which
			// it shares), and a wake-up for a state change comes with
			// the kick counter at zero.
			_, _ = virtionet.ReadEventFD(a.kickFD)
		}
	}
}

// Stats returns the counters of the queue's current virtio-net queue
// (zero when none was set up yet). Safe from any goroutine; counters start
// over with each front-end connection.
func (q *Queue) Stats() virtionet.Stats {
	if rx := q.rx.Load(); rx != nil {
		return rx.Snapshot()
	}
	if tx := q.tx.Load(); tx != nil {
		return tx.Snapshot()
	}
	return virtionet.Stats{}
}

// CanSleep reports whether the guest kicks this queue: false in poll mode
// (SET_VRING_KICK without an fd), where a poller must not sleep waiting
// for a kick.
func (a *Active) CanSleep() bool { return a.kickFD >= 0 }

// Break marks the device broken because of what the data path saw on this
// queue (an Rx/Tx method returned an error: the guest broke the virtio
// contract). It does not wait; the control goroutine tears the session
// down. A Break for a session that already ended does nothing.
func (a *Active) Break(reason error) { a.q.dev.breakSession(a.session, a.Index, reason) }

// newQueue creates the queue's epoll instance and wake eventfd.
func newQueue(d *Device, index int) (*Queue, error) {
	q := &Queue{dev: d, index: index, epfd: -1, wakefd: -1, curKick: -1}
	q.ctl.reset()
	q.cur.Store(&snapshot{})
	var err error
	if q.epfd, err = unix.EpollCreate1(unix.EPOLL_CLOEXEC); err != nil {
		return nil, err
	}
	if q.wakefd, err = unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK); err != nil {
		q.closeFDs()
		return nil, err
	}
	ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(q.wakefd)}
	if err = unix.EpollCtl(q.epfd, unix.EPOLL_CTL_ADD, q.wakefd, &ev); err != nil {
		q.closeFDs()
		return nil, err
	}
	return q, nil
}

func (q *Queue) closeFDs() {
	if q.epfd >= 0 {
		_ = unix.Close(q.epfd)
		q.epfd = -1
	}
	if q.wakefd >= 0 {
		_ = unix.Close(q.wakefd)
		q.wakefd = -1
	}
}

// publish makes act (nil: not running) what Begin returns from now on and
// returns its generation, for settle. It registers act's kick fd in epfd
// and wakes a sleeping poller. Control path only.
func (q *Queue) publish(act *Active) uint64 {
	q.gen++
	kick := -1
	if act != nil {
		kick = act.kickFD
	}
	if kick != q.curKick {
		if q.curKick >= 0 {
			_ = unix.EpollCtl(q.epfd, unix.EPOLL_CTL_DEL, q.curKick, nil)
		}
		q.curKick = -1
		if kick >= 0 {
			ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(kick)}
			if unix.EpollCtl(q.epfd, unix.EPOLL_CTL_ADD, kick, &ev) == nil {
				q.curKick = kick
			}
		}
	}
	q.cur.Store(&snapshot{gen: q.gen, act: act})
	one := [8]byte{1}
	_, _ = unix.Write(q.wakefd, one[:])
	return q.gen
}

// releaseTimeout bounds how long the control path waits for a burst to
// end. A burst that long is a bug; the old mappings and fds are then
// leaked rather than pulled from under it.
var releaseTimeout = 10 * time.Second

// waitRelease returns once the queue is bound to a snapshot of generation
// gen or newer, so that nothing older is reachable from the data path: the
// next Begin rebinds it, or, if no burst comes along, the control path
// takes the lock and rebinds it itself. It reports false on timeout.
func (q *Queue) waitRelease(gen uint64) bool {
	deadline := time.Now().Add(releaseTimeout)
	wait := 20 * time.Microsecond
	for {
		if q.boundGen.Load() >= gen {
			return true
		}
		if q.lock.CompareAndSwap(0, 2) {
			if s := q.cur.Load(); s != q.bound {
				q.rebindProtected(s)
			}
			q.lock.Store(0)
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(wait)
		if wait < 2*time.Millisecond {
			wait *= 2
		}
	}
}
