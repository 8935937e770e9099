package vswitch

import "sync"

// rxQueue is the receive side of one (port, queue) pair. Exactly one worker
// polls it, so its methods need no locking. One call per burst.
type rxQueue interface {
	// receive fills fb with up to MaxBurst frames and returns how many.
	// Frames the queue itself rejects (a malformed guest chain, say) never
	// reach fb: it counts them in c as received and dropped, so they do
	// not disappear. An error means the queue broke: the worker tells the
	// port's driver (fail).
	receive(fb *frameBurst, c *burstCounts) (int, error)
	// release returns the buffers of the frames last received (UMEM
	// frames to the fill ring, guest chains to the guest as used), once
	// every destination has copied them.
	release(fb *frameBurst) error
	// waker says how a sleeping worker learns of new frames: a file
	// descriptor that becomes readable, and what to do around sleeping.
	// fd < 0 means the queue cannot wake anyone: its worker keeps polling.
	waker() waker
}

// waker is how one queue wakes its worker from epoll.
type waker struct {
	fd int
	// arm asks the peer to signal fd for new frames (vhost: re-enable
	// kicks). The worker polls the queue once more after arming, so a
	// frame that arrived just before it is not left waiting.
	arm func()
	// disarm stops the signals while the worker polls again.
	disarm func()
	// drain consumes a wake-up (reads the eventfd).
	drain func()
}

// txQueue is the transmit side of one (port, queue) pair. Several workers
// may transmit on it; each holds the queue's lock for a whole burst.
type txQueue interface {
	// transmit sends the frames of fb selected by mask, adding to c what
	// it transmitted and, by reason, what it dropped.
	transmit(fb *frameBurst, mask frameMask, c *burstCounts)
}

// rxBinding is a polled queue with its counters.
type rxBinding struct {
	port  *port
	q     rxQueue
	stats *QueueStats
}

// txBinding is a transmit queue with its lock and counters.
type txBinding struct {
	mu    sync.Mutex
	q     txQueue
	stats *QueueStats
}
