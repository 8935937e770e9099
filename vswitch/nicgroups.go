package vswitch

import (
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/xvswitch/xvswitch/afpacket"
)

// nicGroupQueue is the NIC port's ingress queue for group frames. The XDP
// program leaves every broadcast and multicast frame to the host's kernel
// (the host needs router advertisements, DHCP replies, its groups); the
// switch takes its copies from the kernel through an AF_PACKET socket on
// the interface (package afpacket), and they enter the switch here, as one
// more ingress queue of the port: flooding, learning and counters apply
// as to frames from AF_XDP. Like nicQueue it outlives its sockets
// (nicrecover.go swaps them) and wakes its worker through an epoll set of
// its own holding the current one. It has no egress side: frames to the
// NIC leave through the AF_XDP queues.
type nicGroupQueue struct {
	sock atomic.Pointer[afpacket.Socket] // nil: no socket (the interface is gone)
	link *nicLink
	epfd int

	// The polling worker's: the socket of the burst between Receive and
	// Release, and the burst's frames.
	rx     *afpacket.Socket
	frames [MaxBurst]afpacket.Frame
}

func newNICGroupQueue(link *nicLink) (*nicGroupQueue, error) {
	fd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, err
	}
	return &nicGroupQueue{link: link, epfd: fd}, nil
}

// attach makes s the queue's socket.
func (q *nicGroupQueue) attach(s *afpacket.Socket) {
	ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(s.FD())}
	_ = unix.EpollCtl(q.epfd, unix.EPOLL_CTL_ADD, s.FD(), &ev)
	q.sock.Store(s)
}

// detach takes s off the queue; it may be closed once the workers forward
// with a newer snapshot.
func (q *nicGroupQueue) detach(s *afpacket.Socket) {
	q.sock.CompareAndSwap(s, nil)
	_ = unix.EpollCtl(q.epfd, unix.EPOLL_CTL_DEL, s.FD(), nil)
}

func (q *nicGroupQueue) close() { unix.Close(q.epfd) }

// Receive hands the switch the group frames waiting in the ring. A frame
// the ring could not hold whole (longer than the slots the socket was
// opened with, for the MTU it had then) is too_long; one the kernel's
// header does not describe is malformed: both are received and dropped
// here. A TCP or UDP checksum is completed when the kernel says it is
// partial (a local sender with offload: always right to complete) or the
// port completes them anyway (csum.go).
func (q *nicGroupQueue) Receive(b *Burst, c *Counts) (int, error) {
	s := q.sock.Load()
	if s == nil {
		return 0, nil
	}
	n := s.Receive(q.frames[:])
	fix := q.link.fixCsum.Load()
	var fixed uint64
	kept := 0
	for i := 0; i < n; i++ {
		f := &q.frames[i]
		switch {
		case f.Data == nil:
			c.Frame(f.WireLen)
			c.Drop(DropMalformed)
			continue
		case f.Truncated():
			c.Frame(f.WireLen)
			c.Drop(DropTooLong)
			continue
		}
		if (fix || f.CsumPartial) && completeL4Checksum(f.Data) {
			fixed++
		}
		b.SetOne(kept, f.Data)
		kept++
	}
	if fixed != 0 {
		q.link.csumCompleted.Add(fixed)
	}
	if kept == 0 {
		// No burst follows, so no Release: the slots go back now.
		s.Release()
		return 0, nil
	}
	q.rx = s
	return kept, nil
}

// Release gives the burst's slots back to the ring they came from (the
// queue's socket may have been swapped meanwhile; that one is closed only
// after the burst).
func (q *nicGroupQueue) Release(*Burst) error {
	if q.rx != nil {
		q.rx.Release()
		q.rx = nil
	}
	return nil
}

// Waker: the queue's epoll set polls readable while its ring holds frames.
func (q *nicGroupQueue) Waker() Waker { return Waker{FD: q.epfd} }
