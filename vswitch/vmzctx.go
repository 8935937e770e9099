package vswitch

import (
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/xvswitch/xvswitch/virtionet"
	"github.com/xvswitch/xvswitch/xsk"
)

// The zero-copy transmit path of a VM that owns NIC queues
// (docs/zerocopy.md). The owner's socket is on a UMEM over the VM's
// memory, so a frame the guest transmits can go on the socket's TX ring
// by its offset in that range: the kernel reads it from the guest's own
// buffer. Its chain stays in flight (virtionet.TxQueue.Hold) until the
// kernel's completion names it, then becomes used by ID, out of order
// (an owner never offers IN_ORDER).
//
// Which frames: those the forwarder sends out of the NIC the owner's
// queues are on, from the VM's TX queue i onto the socket of its i-th
// owned queue, when the frame is one contiguous segment of guest memory
// (a chain whose frame sits in one descriptor), carries no offload (no
// checksum or GSO request in its virtio-net header), fits a chunk and the
// link's MTU, and its key (offset &^ 1, what the completion carries) is
// not in flight already. Everything else goes on through the NIC port's
// queue and is copied, as for any VM. A port that enforces its source MAC
// (mac= without spoof=allow) gets no zcTx at all: the guest could
// rewrite the source after the check, while the frame waits in its
// memory for the kernel.
//
// Who touches what: the worker polling the VM's TX queue i, and only it,
// produces on the socket's TX ring and consumes its completion ring (in
// the burst, from vhostFromGuest.Receive and the NIC egress's sendAsIs);
// the NIC worker polling the owned queue keeps the fill and RX rings. mu
// is taken once per burst by that worker and by teardown, which closes
// zcTx before the socket goes.

// zcTxReap is false only in tests that keep chains held until a
// teardown gives them back.
var zcTxReap = func() *atomic.Bool { var b atomic.Bool; b.Store(true); return &b }()

// ownerTXRing is the owner socket's TX and completion ring size: it bounds
// the chains in flight to the kernel (a guest's TX ring has 256).
const ownerTXRing = 256

// The address table keeps at most ownerTXRing entries a quarter full.
var _ [addrSlots - 4*ownerTXRing]struct{}

// zcTx is the zero-copy transmit state of one owned queue's socket.
type zcTx struct {
	mu     sync.Mutex
	closed bool // teardown: the socket is going, nothing more is sent
	sock   *xsk.Socket
	base   uintptr // host address of the range's first byte
	area   uint64  // the switch area's end
	size   uint64  // the range's length
	link   *nicLink
	from   *vhostFromGuest

	// The poller's, under mu: the TX queue of the burst in progress,
	// chains in flight by completion key, and burst scratch.
	tx     *virtionet.TxQueue
	byAddr addrTable
	descs  [MaxBurst]xsk.Desc
	ids    [MaxBurst]uint16
	keys   [MaxBurst]uint64
}

// reap gives back, as used, the chains whose frames the kernel completed,
// and remembers tx as the queue of the burst that follows. Called by the
// poller at every Receive of the VM's TX queue, so completions never wait
// for the guest to send again. A non-nil error: the guest broke its ring.
func (z *zcTx) reap(tx *virtionet.TxQueue) error {
	z.mu.Lock()
	defer z.mu.Unlock()
	if z.closed {
		z.tx = nil
		return nil
	}
	z.tx = tx
	if !zcTxReap.Load() {
		return nil
	}
	for round := 0; round < ownerTXRing/MaxBurst && z.sock.TXAtOutstanding() > 0; round++ {
		n, _ := z.sock.CompleteAt(z.keys[:]) // a failed kick is xsk's to count
		k := 0
		for _, key := range z.keys[:n] {
			if id, ok := z.byAddr.take(key); ok {
				z.ids[k] = id
				k++
			}
		}
		if _, err := tx.CompleteHeld(z.ids[:k]); err != nil {
			return err
		}
		if n < len(z.keys) {
			break
		}
	}
	return nil
}

// transmit sends the frames of mask that qualify (above) on the owner's
// socket, counts them on c as sent without a copy, and returns the rest,
// for the copy path. q is the NIC egress queue the forwarder chose: the
// frames' counts are its.
func (z *zcTx) transmit(q *nicQueue, b *Burst, mask Mask, c *Counts) Mask {
	if z.link != q.link || !q.link.up.Load() {
		return mask
	}
	z.mu.Lock()
	defer z.mu.Unlock()
	tx := z.tx
	if z.closed || tx == nil {
		return mask
	}
	room := z.sock.TXRoom()
	maxLen := min(q.link.maxFrame(), ownerChunk)
	frames := tx.Frames()
	k := 0
	var bytes uint64
	for m := mask; m != 0 && k < room; m &= m - 1 {
		i := m.Lowest()
		f := b.Frame(i)
		if !f.off.IsZero() || len(f.segs) != 1 || f.len > maxLen || i >= frames.Len() {
			continue
		}
		h := hostAddr(f.segs[0])
		// Frame i of the TX queue's burst, whose chain Hold can keep: the
		// burst reads that queue's table, where a retagged view is swapped
		// in around its transmit, but a view starts with the switch's
		// own prefix, a segment of its own (len(f.segs) != 1 above).
		if s := frames.Segments(i); b.table() != frames || len(s) != 1 || hostAddr(s[0]) != h {
			continue
		}
		if h < z.base {
			continue
		}
		off := uint64(h - z.base)
		if off < z.area || off >= z.size || uint64(f.len) > z.size-off {
			continue
		}
		key := xsk.CompletionKey(off)
		if z.byAddr.has(key) {
			continue // a frame at (almost) the same address is in flight
		}
		id, ok := tx.Hold(i)
		if !ok {
			continue
		}
		z.byAddr.put(key, id)
		z.descs[k] = xsk.Desc{Addr: off, Len: uint32(f.len)}
		z.ids[k], z.keys[k] = id, key
		k++
		bytes += uint64(f.len)
		mask &^= 1 << i
	}
	if k == 0 {
		return mask
	}
	sent, _ := z.sock.TransmitAt(z.descs[:k]) // a failed kick: the next reap kicks again
	if sent < k {
		// TXRoom said there was room: only a bug gets here. The chains go
		// back unsent, each counted.
		for j := sent; j < k; j++ {
			z.byAddr.take(z.keys[j])
			bytes -= uint64(z.descs[j].Len)
		}
		_, _ = tx.CompleteHeld(z.ids[sent:k])
		c.DropN(DropTxFull, k-sent)
	}
	c.Frames(uint64(sent), bytes)
	c.Zerocopy(uint64(sent))
	return mask
}

// outstanding reports whether frames wait for their completion.
func (z *zcTx) outstanding() bool {
	z.mu.Lock()
	defer z.mu.Unlock()
	return !z.closed && z.sock.TXAtOutstanding() > 0
}

// close stops the path for good (teardown, before the socket closes):
// after it nothing touches the socket; the chains held are the TX
// queue's to return once the socket is closed (AbandonHeld).
func (z *zcTx) close() {
	z.from.zc.CompareAndSwap(z, nil)
	z.mu.Lock()
	z.closed = true
	z.tx = nil
	z.mu.Unlock()
}

// txIdle lets the worker polling an owner's TX queue sleep while frames
// wait for completions without leaving the guest's chains stuck: its
// epoll set holds the queue's own WaitFD and a timer, which runs while
// the worker sleeps with completions outstanding (a zero-copy NIC
// completes after sendto; on veth in copy mode they are there at once).
type txIdle struct {
	epfd, timer int
	armed       bool
}

// completionPoll is how often a sleeping worker looks for completions.
const completionPoll = 1e6 // 1 ms, in ns

func newTxIdle(waitFD int) (*txIdle, error) {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, err
	}
	t, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
	if err != nil {
		unix.Close(epfd)
		return nil, err
	}
	for _, fd := range []int{waitFD, t} {
		ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(fd)}
		if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
			unix.Close(epfd)
			unix.Close(t)
			return nil, err
		}
	}
	return &txIdle{epfd: epfd, timer: t}, nil
}

func (t *txIdle) set(on bool) {
	if on == t.armed {
		return
	}
	var spec unix.ItimerSpec
	if on {
		spec.Interval = unix.NsecToTimespec(completionPoll)
		spec.Value = spec.Interval
	}
	if unix.TimerfdSettime(t.timer, 0, &spec, nil) == nil {
		t.armed = on
	}
}

func (t *txIdle) drain() {
	var b [8]byte
	_, _ = unix.Read(t.timer, b[:])
}

func (t *txIdle) close() {
	unix.Close(t.epfd)
	unix.Close(t.timer)
}
