package vswitch

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/xvswitch/xvswitch/virtionet"
	"github.com/xvswitch/xvswitch/xsk"
)

// nicLink is what the data path knows of the port's interface; the
// watcher updates it, workers load it once per burst.
type nicLink struct {
	up  atomic.Bool  // the interface exists, is up and has carrier
	mtu atomic.Int32 // its MTU
	// fixCsum: complete the TCP and UDP checksums of received frames
	// (csum.go).
	fixCsum atomic.Bool
	// csumCompleted counts the frames whose checksum that changed.
	csumCompleted atomic.Uint64
}

// maxFrame is the longest frame the interface sends: MTU + Ethernet
// header + one VLAN tag.
func (l *nicLink) maxFrame() int { return int(l.mtu.Load()) + ethHeaderLen + 4 }

// nicQueue is one queue of a NIC port: the AF_XDP socket bound to that rx
// queue of the interface, while there is one. The queue outlives its
// sockets: when the interface goes and comes back, the port swaps them
// (nicrecover.go), and the switch's queue, stats and epoll set stay.
//
// The socket's frame stash is shared by the receive side (the worker
// polling it returns frames) and the transmit side (any worker takes
// frames to send), so both take mu, once per burst.
type nicQueue struct {
	mu   sync.Mutex
	sock atomic.Pointer[xsk.Socket] // nil: no socket (the interface is gone)
	link *nicLink
	// epfd is the queue's Waker: an epoll set holding the current
	// socket while the polling worker sleeps (nicwake.go), so a worker's
	// own epoll set, built once per snapshot, stays valid while sockets
	// come and go.
	epfd int
	// wmu guards armed (the polling worker sleeps) and inSet (the fd of
	// the socket in epfd, -1: none): nicwake.go.
	wmu   sync.Mutex
	armed bool
	inSet int
	// txVia is the queue that transmits for this one while a VM owns
	// this one's rx queue and the port has no socket here (nicowned.go).
	txVia atomic.Pointer[nicQueue]
	// fin finishes guests' offloaded frames before they leave (segment.go);
	// used under the egress queue's lock, like Transmit.
	fin *finisher
	// busy is the socket whose frames a burst holds, between Receive and
	// Release (detachWait waits for it).
	busy atomic.Pointer[xsk.Socket]
	// zc is the zero-copy receive state when the socket is a VM owner's
	// (vmzerocopy.go), else nil.
	zc atomic.Pointer[zcRx]

	// The polling worker's: the burst between Receive and Release.
	rx    *xsk.Socket
	descs [MaxBurst]xsk.Desc
	n     int
}

func newNICQueue(link *nicLink) (*nicQueue, error) {
	fd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, err
	}
	return &nicQueue{link: link, epfd: fd, inSet: -1}, nil
}

// attach makes s the queue's socket.
func (q *nicQueue) attach(s *xsk.Socket) {
	q.wmu.Lock()
	q.sock.Store(s)
	q.register() // a sleeping worker hears of its frames
	q.wmu.Unlock()
}

// detach takes s off the queue (the data path may have let go of it
// already). Workers may still be in a burst on it until the next
// published snapshot: only then may it be closed.
func (q *nicQueue) detach(s *xsk.Socket) {
	q.wmu.Lock()
	q.sock.CompareAndSwap(s, nil)
	if q.inSet == s.FD() {
		q.unregister()
	}
	q.wmu.Unlock()
}

// detachWait takes s off the queue and returns once no worker is in a
// burst on it: nothing receives from it after detachWait took mu, and a
// burst that received before lets go at Release. For a socket whose
// memory goes away without a snapshot publication in between (a VM's
// owned queue, vmowned.go). It waits at most wait.
func (q *nicQueue) detachWait(s *xsk.Socket, wait time.Duration) bool {
	q.detach(s)
	q.mu.Lock()
	//lint:ignore SA2001 the empty section is the point: Receive and Transmit hold mu while they use the socket
	q.mu.Unlock()
	deadline := time.Now().Add(wait)
	for q.busy.Load() == s {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Microsecond)
	}
	return true
}

// close closes the queue's epoll set; its socket is detached already.
func (q *nicQueue) close() { unix.Close(q.epfd) }

func (q *nicQueue) Receive(b *Burst, c *Counts) (int, error) {
	if q.sock.Load() == nil {
		return 0, nil
	}
	// Loaded again under mu: a socket detached with detachWait is not
	// received from once detachWait has taken mu.
	q.mu.Lock()
	s := q.sock.Load()
	if s == nil {
		q.mu.Unlock()
		return 0, nil
	}
	n := s.Receive(q.descs[:])
	if z := q.zc.Load(); z != nil && z.sock == s {
		// Frames in the VM's own buffers go to it from here; the rest
		// (the switch area's) are forwarded.
		n = q.zcBurst(z, n, c)
	}
	if n > 0 {
		q.busy.Store(s)
	}
	q.mu.Unlock()
	// The switch owns the frames until Release: their checksums are
	// completed in place, before anything reads them.
	fix := q.link.fixCsum.Load()
	var fixed uint64
	for i := 0; i < n; i++ {
		f := s.Frame(q.descs[i])
		if fix && completeL4Checksum(f) {
			fixed++
		}
		b.SetOne(i, f)
	}
	if fixed != 0 {
		q.link.csumCompleted.Add(fixed)
	}
	q.rx, q.n = s, n
	return n, nil
}

func (q *nicQueue) Release(*Burst) error {
	if q.n == 0 {
		return nil
	}
	// The socket the frames came from: the queue's may have been swapped
	// meanwhile, this one is closed only after the burst.
	q.mu.Lock()
	q.rx.Release(q.descs[:q.n])
	q.busy.Store(nil)
	q.mu.Unlock()
	q.rx, q.n = nil, 0
	return nil
}

// Waker: the queue's epoll set polls readable when its socket's RX ring
// has frames, while the worker has armed it (nicwake.go).
func (q *nicQueue) Waker() Waker { return Waker{FD: q.epfd, Arm: q.arm, Disarm: q.disarm} }

// Transmit copies the selected frames into UMEM frames and sends them with
// one kick. Frames a guest left a checksum or segmentation to are finished
// in software first (segment.go): AF_XDP has no TSO.
func (q *nicQueue) Transmit(b *Burst, mask Mask, c *Counts) {
	transmitFinishing(&q.fin, b, mask, c, virtionet.Offloads{}, q)
}

// sendAsIs is Transmit for frames that are complete.
func (q *nicQueue) sendAsIs(b *Burst, mask Mask, c *Counts) {
	if z := b.zc; z != nil {
		// A VM owning queues of this NIC: what qualifies leaves from
		// its own memory, on its own socket (vmzctx.go).
		if mask = z.transmit(q, b, mask, c); mask == 0 {
			return
		}
	}
	if v := q.txVia.Load(); v != nil {
		v.sendAsIs(b, mask, c) // never delegates again: v has a socket
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	s := q.sock.Load()
	if s == nil || !q.link.up.Load() {
		// Nothing would leave: no socket, or no link. Frames queued in
		// the TX ring now would go out late, when the link returns.
		c.DropN(DropPortDown, mask.Count())
		return
	}
	maxLen := q.link.maxFrame()
	_, _ = s.Complete()
	got := s.TXReserve(mask.Count())
	slot := 0
	var bytes uint64
	fr := b.table()
	for m := mask; m != 0; m &= m - 1 {
		f := frameAt(fr, m.Lowest())
		if f.len > maxLen {
			c.Drop(DropTooLong)
			continue
		}
		if slot >= got {
			c.Drop(DropTxFull)
			continue
		}
		buf := s.TXBuffer(slot)
		if len(buf) < f.len {
			c.Drop(DropTooLong)
			continue
		}
		f.CopyTo(buf)
		s.TXSetLen(slot, f.len)
		slot++
		bytes += uint64(f.len)
	}
	// A failed kick leaves the frames in the TX ring; the next burst's
	// Complete kicks again, and xsk counts the failure (Counters.KickErrors).
	_, err := s.TXSubmit(slot)
	if errors.Is(err, unix.ENXIO) {
		// The socket is no longer bound: its interface was deleted. These
		// frames will never leave, and nor would later ones: the queue
		// lets go of the socket at once (its port closes it when the
		// watcher sees the interface gone).
		c.DropN(DropPortDown, slot)
		q.sock.CompareAndSwap(s, nil)
		return
	}
	c.Frames(uint64(slot), bytes)
	c.Copied(uint64(slot), bytes) // every frame went through CopyTo
}
