package virtionet

import (
	"errors"
	"sync/atomic"

	"github.com/xvswitch/xvswitch/virtq"
)

// Holding transmitted chains past the burst (the zero-copy transmit path,
// docs/zerocopy.md): the switch hands a frame's bytes, still in the
// guest's buffer, to the kernel by address, and the chain may become used
// only when the kernel has read them. Hold takes a frame of the last
// Receive out of Complete; CompleteHeld gives it back later, by ID, in
// whatever order completions come (used entries out of pop order: the
// holder's device never offers IN_ORDER). The ring counts held chains as
// in flight until then.
//
// A held chain is the kernel's until the socket it went to is closed: the
// holder closes its sockets and then calls AbandonHeld, and the queue's
// next call on the worker's side (Receive, Complete, CompleteHeld) returns
// every held chain as used with length 0, as Complete returns any chain.
// vhost's Config.OnTxStop lets the holder do that before a ring stops or
// its memory is replaced, so that the rebind's Complete returns them on
// the ring they came from.

// errHeldTwice: the ring made a held chain's ID available again.
var errHeldTwice = errors.New("virtionet: the ring made a held chain's id available again")

// txHeld is the TxQueue's table of held chains, by chain ID.
type txHeld struct {
	byID    []heldEntry // by ID, all 65536 once something was held
	n       int
	abandon atomic.Bool   // set by AbandonHeld, from any goroutine
	shown   atomic.Int32  // n as other goroutines may read it (Held)
	lost    atomic.Uint64 // held chains forgotten by Reset, never used
	mask    uint32        // chains of the last Receive held (by chain index)
	out     [virtq.MaxBurst]virtq.Used
}

type heldEntry struct {
	descs uint16
	held  bool
}

// Hold keeps frame i of the last Receive out of Complete and returns its
// chain's ID, which CompleteHeld takes later. ok is false for no such
// frame, a frame held already, or a broken queue. A guest that makes an
// ID available again while it is held breaks the queue (ok false).
func (q *TxQueue) Hold(i int) (id uint16, ok bool) {
	if q.err != nil || i < 0 || i >= q.frames.n {
		return 0, false
	}
	c := q.chainOf[i]
	if q.held.mask&(1<<c) != 0 {
		return 0, false
	}
	u := q.take.Used[c]
	if q.held.byID == nil {
		// Once, at the first Hold: every ID a guest can name (256 KiB,
		// only on queues that hold), so no later Hold allocates.
		q.held.byID = make([]heldEntry, 1<<16)
	}
	e := &q.held.byID[u.ID]
	if e.held {
		q.fail("hold", errHeldTwice)
		return 0, false
	}
	*e = heldEntry{descs: u.Descs, held: true}
	q.held.n++
	q.held.mask |= 1 << c
	q.held.shown.Store(int32(q.held.n))
	return u.ID, true
}

// CompleteHeld gives held chains back to the guest as used (length 0),
// in the order of ids, and interrupts it once if it asked. IDs not held
// (returned already, or abandoned since) are skipped. It returns how many
// it gave back; a non-nil error means the ring broke.
func (q *TxQueue) CompleteHeld(ids []uint16) (int, error) {
	q.returnAbandoned()
	if q.err != nil {
		return 0, q.err
	}
	if q.ring == nil {
		return 0, nil
	}
	k, done := 0, 0
	for _, id := range ids {
		if int(id) >= len(q.held.byID) || !q.held.byID[id].held {
			continue
		}
		q.held.out[k] = virtq.Used{ID: id, Descs: q.held.byID[id].descs}
		q.held.byID[id] = heldEntry{}
		q.held.n--
		k++
		if k == len(q.held.out) {
			if err := q.pushHeld(k); err != nil {
				return done, err
			}
			done += k
			k = 0
		}
	}
	if k > 0 {
		if err := q.pushHeld(k); err != nil {
			return done, err
		}
		done += k
	}
	q.held.shown.Store(int32(q.held.n))
	if done > 0 {
		q.notify()
	}
	return done, nil
}

func (q *TxQueue) pushHeld(k int) error {
	if err := q.ring.Push(q.held.out[:k]); err != nil {
		q.fail("push", err)
		return q.err
	}
	return nil
}

// AbandonHeld says the held chains' bytes will not be read by anyone any
// more (the socket they went to is closed): the queue's next call returns
// them all as used. Safe from any goroutine.
func (q *TxQueue) AbandonHeld() { q.held.abandon.Store(true) }

// Held is how many chains are held, as of the queue's last Hold or
// completion. Safe from any goroutine.
func (q *TxQueue) Held() int { return int(q.held.shown.Load()) }

// HeldLost is how many held chains a Reset forgot, never used: nobody
// called AbandonHeld before the ring went. Safe from any goroutine.
func (q *TxQueue) HeldLost() uint64 { return q.held.lost.Load() }

// returnAbandoned returns every held chain after AbandonHeld; on a
// stopped or broken queue they are only forgotten.
func (q *TxQueue) returnAbandoned() {
	if !q.held.abandon.Load() || !q.held.abandon.CompareAndSwap(true, false) {
		return
	}
	if q.held.n == 0 {
		return
	}
	if q.ring == nil || q.err != nil {
		q.forgetHeld(false)
		return
	}
	k := 0
	for id := range q.held.byID {
		e := &q.held.byID[id]
		if !e.held {
			continue
		}
		q.held.out[k] = virtq.Used{ID: uint16(id), Descs: e.descs}
		*e = heldEntry{}
		q.held.n--
		k++
		if k == len(q.held.out) {
			if q.pushHeld(k) != nil {
				q.forgetHeld(false)
				return
			}
			k = 0
		}
	}
	if k > 0 && q.pushHeld(k) != nil {
		q.forgetHeld(false)
		return
	}
	q.held.shown.Store(0)
	q.notify()
}

// forgetHeld drops the table without returning anything; lost counts
// them when the ring they were held on goes away unreturned.
func (q *TxQueue) forgetHeld(lost bool) {
	if lost {
		q.held.lost.Add(uint64(q.held.n))
	}
	clear(q.held.byID)
	q.held.n = 0
	q.held.mask = 0
	q.held.shown.Store(0)
}

// unheld drops the chains of the last Receive that Hold took from
// q.take.Used[:n] and returns what is left to push.
func (q *TxQueue) unheld(n int) []virtq.Used {
	m := q.held.mask
	if m == 0 {
		return q.take.Used[:n]
	}
	q.held.mask = 0
	k := 0
	for i := 0; i < n; i++ {
		if m&(1<<i) == 0 {
			q.take.Used[k] = q.take.Used[i]
			k++
		}
	}
	return q.take.Used[:k]
}
