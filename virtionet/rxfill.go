package virtionet

import "github.com/xvswitch/xvswitch/virtq"

// The one-pass receive path: a ring that implements virtq.Filler (both
// kinds do) takes a run of one-segment frames straight into its
// buffers, each popped, written and used in one pass, without the held
// bursts and staged used entries of placeRun and the general path. It
// applies only where those hold nothing: the frames before the run are
// then all published, so the guest still sees the frames in order, and
// no buffer popped earlier is passed over.

// The head a Filler writes is the virtio-net header of virtio 1.x.
const _ = uint(HeaderLen-virtq.FillHeadLen) + uint(virtq.FillHeadLen-HeaderLen)

// eagerDelivers is how many Delivers after one that ran out of buffers
// before its last frame hand their runs to an eager Fill (virtq.FillJob.
// Eager): a guest that is behind is the one everybody waits for, also in
// the Delivers that find enough buffers between the ones that do not, and
// a line it gets early is work it starts while the rest are copied. A
// switch that never runs a guest's ring dry never publishes eagerly; one
// that did stops ~256 Delivers after the guest caught up (well under a
// millisecond at the rates where it matters).
const eagerDelivers = 256

// fillRun delivers frames i.. of f through the ring's Filler, up to the
// first frame that does not qualify (fastFrame) or buffer that does not
// (see virtq.Filler), and returns how many it delivered.
func (q *RxQueue) fillRun(f *Frames, i int) int {
	j := &q.fill
	n, bytes := 0, 0
	for k := i; k < f.n && n < virtq.MaxBurst && q.fastFrame(f, k); k++ {
		j.Src[n] = f.segs[k][0]
		lo, hi := f.rxHeader(k, 1)
		j.Head[n] = virtq.FillHead{Lo: lo, Hi: hi}
		bytes += f.lens[k]
		n++
	}
	if n == 0 {
		return 0
	}
	j.N = n
	j.Eager = q.eagerLeft > 0
	done, err := q.filler.Fill(j)
	j.Published = 0 // counted below; unwind counts it only for a Fill a fault interrupted
	if err != nil {
		q.fail("fill", err)
		return 0
	}
	if done == 0 {
		return 0
	}
	for _, l := range f.lens[i+done : i+n] {
		bytes -= l // the frames after the buffer that stopped it
	}
	q.ctr.pass(done, bytes)
	q.delivered += done
	q.streamed += j.Streamed
	q.pushed = true
	return done
}

// filling reports whether Deliver may hand frames to the ring's Filler
// now: the ring has one, frames are written with the header it writes,
// writes are not being logged, and no buffer is held or used entry staged.
func (q *RxQueue) filling() bool {
	return q.filler != nil && q.hdrLen == HeaderLen && q.dirty == nil && q.avail() == 0 && q.nused == 0
}

// fillerOf returns ring's Filler, or nil.
func fillerOf(ring virtq.Ring) virtq.Filler {
	f, _ := ring.(virtq.Filler)
	return f
}

// LastBurstStreamed returns how many of the frames the last Deliver
// delivered its ring's Filler wrote with streaming stores, where the ring
// measured that cheaper (guestmem.StreamChoice). Only the owning worker
// may call it.
func (q *RxQueue) LastBurstStreamed() int { return q.streamed }
