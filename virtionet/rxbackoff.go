package virtionet

import "time"

// The receive back-off (QueueConfig.RxBackoff).
//
// A guest whose receive ring ran dry is behind, and about to write new
// buffers, the next descriptor the device reads first. Every Deliver that
// comes meanwhile reads that descriptor to see whether it is there yet,
// and each read takes a copy of the line the guest is writing, which the
// guest's next store to it must take back: a switch that brings frames
// faster than the guest takes them (a flood, a faster sender, the bench's
// generator) slows the guest's refill with its own looks, one cross-CPU
// transfer each. On the packed ring that line is the descriptor's own;
// with the two CPUs far apart (~170 ns a line) a 1 µs back-off let the
// guest take 3% more frames, by the medians of 49 and 42 runs, and
// changed nothing with them near (BENCHMARKS.md, "The receive back-off").
//
// So for RxBackoff after a Deliver that ran out of buffers before its
// last frame, Deliver counts its frames as no_rx_buffers without reading
// the ring: the guest had none a moment ago, and is left to post them in
// peace. Nothing is held and nobody waits. Bursts that come further apart
// than the back-off (a NIC's at any rate a guest keeps up with) never meet
// it, and a guest with buffers never starts it.

// rxBackoff is a receive queue's back-off state.
type rxBackoff struct {
	span  time.Duration // QueueConfig.RxBackoff; 0: off
	until time.Duration // on backoffClock; 0: not backing off
}

// backoffEpoch is backoffClock's zero: time.Since reads the monotonic
// clock, without allocating.
var backoffEpoch = time.Now()

func backoffClock() time.Duration { return time.Since(backoffEpoch) }

// holding reports whether Deliver should leave the ring alone now. It
// reads the clock only while a back-off runs, and is small enough to be
// inlined into Deliver, so that a queue not backing off pays one
// comparison for it.
func (b *rxBackoff) holding() bool {
	return b.until != 0 && b.stillHolding()
}

// stillHolding is holding while a back-off runs: until the clock passes
// its end, after which the back-off is over. Out of line, so that holding
// stays small enough to inline.
//
//go:noinline
func (b *rxBackoff) stillHolding() bool {
	if backoffClock() < b.until {
		return true
	}
	b.until = 0
	return false
}

// ranDry starts a back-off (when one is configured): the ring had no
// buffer for a frame of the Deliver that ends.
func (b *rxBackoff) ranDry() {
	if b.span > 0 {
		b.until = backoffClock() + b.span
	}
}
