package vswitch

import "golang.org/x/sys/unix"

// The NIC queue's socket sits in the queue's epoll set (its Waker) only
// while the worker polling the queue sleeps, between Arm and Disarm.
//
// Why: a socket in an epoll set has a waiter on its wait queue, and the
// kernel wakes that queue on every frame, whatever the event mask: in
// copy mode each transmitted frame's skb, freed, calls sk_write_space
// (sock_wfree -> sock_def_write_space -> __wake_up_sync_key ->
// ep_poll_callback, a spin lock and a read lock with interrupts off), and
// each received frame calls sk_data_ready the same way on the sender's
// CPU. A busy worker never reads those wake-ups: it polls the rings. A
// perf profile of the worker in bench scenario 5 (VM -> NIC, 64 B) had
// 4.8% of its samples under sock_wfree's wake-up (DPDK's af_xdp PMD,
// which never sleeps, pays none of it); xsk's BenchmarkTXWaiter, six
// alternations on a loaded machine, put the socket in an epoll set at
// +2.6% per transmitted frame, within that machine's noise. So the socket joins the set when
// the worker arms its wake-ups before sleeping and leaves it when the
// worker wakes: two epoll_ctl calls per sleep, none per frame. A socket
// that has frames already when it joins makes the set readable at once,
// so nothing that arrived while it was out of the set is missed (the
// worker also polls once more after arming).
//
// wmu orders the worker's Arm/Disarm against the control path's
// attach/detach (a socket replaced while the worker sleeps joins the set
// at once, so that its frames wake the worker).

// register puts the current socket into the epoll set if the worker
// sleeps and it is not there yet. Called with wmu held.
func (q *nicQueue) register() {
	s := q.sock.Load()
	if !q.armed || s == nil || q.inSet == s.FD() {
		return
	}
	q.unregister()
	ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(s.FD())}
	if unix.EpollCtl(q.epfd, unix.EPOLL_CTL_ADD, s.FD(), &ev) == nil {
		q.inSet = s.FD()
	}
}

// unregister takes the socket that is in the epoll set out of it. Called
// with wmu held.
func (q *nicQueue) unregister() {
	if q.inSet < 0 {
		return
	}
	_ = unix.EpollCtl(q.epfd, unix.EPOLL_CTL_DEL, q.inSet, nil)
	q.inSet = -1
}

// arm and disarm are the queue's Waker.Arm and Waker.Disarm.
func (q *nicQueue) arm() {
	q.wmu.Lock()
	q.armed = true
	q.register()
	q.wmu.Unlock()
}

func (q *nicQueue) disarm() {
	q.wmu.Lock()
	q.armed = false
	q.unregister()
	q.wmu.Unlock()
}
