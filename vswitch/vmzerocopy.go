package vswitch

import (
	"log/slog"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/xvswitch/xvswitch/vhost"
	"github.com/xvswitch/xvswitch/virtionet"
	"github.com/xvswitch/xvswitch/xsk"
)

// The zero-copy receive path of a VM's owned queue (docs/zerocopy.md).
// The owner's socket (vmowned.go) is on a UMEM over the VM's memory, so
// the guest's own receive buffers can be its fill buffers: the kernel
// writes a frame straight into one, and the switch only writes the
// 12-byte virtio-net header in front and marks the buffer used.
//
// A guest buffer B (UMEM offset off, at least frame_len + 12 = 1536
// bytes of one descriptor) goes on the fill ring at F = off + 12 - 256 -
// headroom = off - 512: the kernel writes frame bytes only from F + 256 +
// headroom = off + 12, at most frame_len (1524) of them, all inside B.
// The 512 bytes in front of the frame (other guest data, or the switch
// area) are never written: the XDP program adjusts neither head nor meta,
// and the socket is not bound with XDP_USE_SG. F is checked to lie in the
// guest's part of the range with a whole chunk behind it.
//
// Everything runs on the NIC worker polling the queue, inside its
// Receive: frames that came back in guest buffers are completed on the
// VM's receive queue (their used entries by ID, out of fill order; the
// owner never offers IN_ORDER), and new buffers are lent. Frames that
// land in the switch area (before the guest posted buffers, or when its
// buffers do not qualify, or while it migrates) go through the switch
// and are copied as before. The VM's queue is taken with a try-lock only
// (its egress lock, then vhost's Begin): if a worker is delivering a
// flood frame there, the completions wait for the next burst. Frames on
// an owned queue are the owner's (the XDP rule), so zero-copy frames
// bypass forwarding: counted as rx on the NIC queue, tx and
// zerocopy_frames on the VM's queue.

// frameHeadroom is where a frame starts in its chunk: XDP_PACKET_HEADROOM
// plus the UMEM's headroom.
const frameHeadroom = 256 + ownerHeadroom

// lendMin is the smallest guest buffer lent: frame_len + the header.
const lendMin = ownerChunk - frameHeadroom + virtionet.HeaderLen

// While guest buffers are lent, a frame landing in one wakes the worker
// (the socket's RX ring), which lends the buffers posted since. With none
// lent nothing would: a guest posting buffers does not kick its receive
// queue (the switch keeps its kicks off). So while none are lent a timer
// in the queue's epoll set wakes the worker every lendRetry to look
// again; it is off whenever a buffer is lent, which for a Linux guest is
// always once its driver runs. No switch-area frame goes on the fill ring
// then: the kernel takes fill entries in order, and a frame landing in
// one ahead of the lent buffers could reach the guest only through
// Deliver, which has no buffers left for it.
const lendRetry = 10 * time.Millisecond

// lendLimit bounds the guest buffers on one socket's fill and RX rings,
// by the size of the VM's receive ring. Not all of them: frames the
// switch floods to the owner (the broadcast ARP that resolves it, other
// VMs' frames) still need buffers of Deliver's, so lending leaves
// lendReserve of the ring to it: QEMU's receive rings have 256 to 1024
// entries, Linux keeps them full. Measured on veth (TestOwnedQueueVM):
// with 64 lent, TCP bursts found the fill ring empty (170 of 2184 frames
// dropped by the kernel); with 192 (a 256-entry ring), none. A bigger
// ring lends more, up to maxLent: the lent buffers are all the kernel has
// to receive into until the worker runs again, and a worker sharing its
// CPU runs again only after a scheduler slice (bench scenario 4, the
// generator on the worker's CPU: with 192 lent of DPDK virtio-user's
// 4096-entry ring, 0.028 Mpps zero-copy against 0.09-0.13 copied, each
// slice's frames beyond 192 dropped as fill_ring_empty).
//
// That reserve is in the ring only if the guest posts all of it, which a
// DPDK guest does not (testpmd posts 512 buffers of any ring by default):
// so lending also leaves lendKeep of the buffers it pops to Deliver, once
// lendFirst are lent: a guest posting a handful gets them all lent, or
// the kernel would have none to receive into.
func lendLimit(ringSize int) int { return max(0, min(maxLent, ringSize-lendReserve)) }

const (
	lendReserve = 64
	lendKeep    = MaxBurst // one burst of copied frames
	lendFirst   = 2 * MaxBurst
	// maxLent is what the fill ring (ownerRing entries) holds; it also
	// bounds the completions waiting for the VM's queue (done).
	maxLent = ownerRing
)

// zcRx is the zero-copy receive state of one owned queue's socket. Only
// the NIC worker polling the queue touches it, under the queue's mu
// (teardown, after detachWait, counts what is left).
type zcRx struct {
	sock       *xsk.Socket
	base       uintptr // host address of the range's first byte
	area, size uint64  // the switch area's end, the range's length
	vmq        *vhost.Queue
	eg         *egress // the VM port's egress for vmq: its lock and stats
	port       string

	byAddr  addrTable   // frame address (UMEM offset) -> chain ID
	lent    int         // guest buffers on the fill or RX ring
	unfit   atomic.Bool // the guest's buffers do not qualify: copy path (read by tests too)
	copying bool        // the VM's queue lends nothing for now (it logs dirty pages)
	stopped bool        // the VM's ring is not running (or broken)
	timer   int         // a timerfd in the NIC queue's epoll set (lendRetry)
	egHeld  bool        // service holds eg.mu (for zcBurst's unwind)
	armed   bool        // the timer runs
	lend    [MaxBurst]virtionet.LentBuffer
	fills   [MaxBurst]uint64
	done    [maxLent]virtionet.LentDone
	ndone   int
	doneLen uint64 // frame bytes in done
	back    [MaxBurst]virtionet.LentDone
	c       Counts // the VM queue's tally
}

// receive takes the frames of descs that landed in guest buffers out of
// the burst (they wait in done for the VM's queue), counts them as the NIC
// queue's rx in c, and returns how many of descs are left, compacted, for
// the switch.
func (z *zcRx) receive(descs []xsk.Desc, c *Counts, link *nicLink) int {
	fix := link.fixCsum.Load()
	var fixed uint64
	k := 0
	for _, d := range descs {
		if d.Addr < z.area {
			descs[k] = d
			k++
			continue
		}
		id, ok := z.byAddr.take(d.Addr)
		if !ok {
			// Not a buffer of ours: cannot happen unless the kernel hands
			// back what it was not given. Nothing to complete; counted.
			c.Frame(int(d.Len))
			c.Drop(DropMalformed) // no reason of its own: it never happens
			continue
		}
		z.lent--
		if fix && completeL4Checksum(z.sock.Frame(d)) {
			// As for any frame from this NIC (csum.go): the peer of a
			// veth may leave checksums partial. A store of two bytes
			// into the lent buffer, not a copy.
			fixed++
		}
		c.Frame(int(d.Len))
		z.done[z.ndone] = virtionet.LentDone{ID: id, Len: int(d.Len)}
		z.ndone++
		z.doneLen += uint64(d.Len)
	}
	if fixed != 0 {
		link.csumCompleted.Add(fixed)
	}
	return k
}

// service completes what waits and lends more, if the VM's queue is free
// now; then keeps the switch's reserve on the fill ring when no guest
// buffer is there.
func (z *zcRx) service() {
	if z.eg.mu.TryLock() {
		z.egHeld = true
		z.serviceVM()
		z.egHeld = false
		z.eg.mu.Unlock()
	}
	if z.unfit.Load() || z.copying {
		z.sock.Refill() // the copy path's full complement
	}
	z.retry(z.lent == 0)
	z.flush()
}

// serviceVM is service's part on the VM's queue, with its egress lock
// held. A fault on guest memory (its front-end truncated it) unwinds from
// here to the worker, which breaks that guest: the deferred EndBurst (Abort)
// and the callers' deferred unlocks let go of what the burst held.
func (z *zcRx) serviceVM() {
	a := z.vmq.Begin()
	if a == nil {
		z.stopped = true
		return
	}
	ok := false
	defer z.vmq.EndBurst(&ok) // a fault: Abort keeps its memory named
	z.stopped = false
	z.complete(a)
	if !z.unfit.Load() {
		z.lendMore(a)
	}
	ok = true
}

// zcBurst is nicQueue.Receive's zero-copy part, called with q.mu held
// after the socket's Receive: it takes the frames that landed in guest
// buffers out of the burst and returns how many are left for the switch.
// Guest memory is touched here (checksums, headers): if that faults, q.mu
// and the VM queue's egress lock are released on the way out.
func (q *nicQueue) zcBurst(z *zcRx, n int, c *Counts) int {
	done := false
	defer func() {
		if !done {
			if z.egHeld {
				z.egHeld = false
				z.eg.mu.Unlock()
			}
			q.mu.Unlock()
		}
	}()
	k := z.receive(q.descs[:n], c, q.link)
	z.service()
	done = true
	return k
}

// flush adds the VM queue's tally to its stats.
func (z *zcRx) flush() {
	if z.c != (Counts{}) {
		z.c.flushEgress(z.eg.stats)
	}
}

func (z *zcRx) complete(a *vhost.Active) {
	if z.ndone == 0 {
		return
	}
	n, err := a.Rx.CompleteLent(z.done[:z.ndone])
	packets, bytes := a.Rx.LastBurstPassed()
	z.c.Frames(packets, bytes)
	z.c.Zerocopy(uint64(n))
	countVirtioDrops(&z.c, a.Rx.LastBurstDrops(), false)
	if err != nil {
		a.Break(err)
	}
	z.ndone, z.doneLen = 0, 0
}

// lendMore lends guest buffers while the fill ring has room.
func (z *zcRx) lendMore(a *vhost.Active) {
	if size := a.Rx.RingSize(); size <= lendReserve {
		// Nothing to lend beside Deliver's reserve: the copy path.
		z.unfit.Store(true)
		slog.Info("vhost: the guest's receive ring is too small to lend buffers from; its frames on the owned queue are copied",
			"port", z.port, "queue", z.sock.Queue(), "ring_size", size, "min_size", lendReserve+1)
		return
	}
	for rounds := 0; rounds < 2; rounds++ {
		want := min(z.sock.FillFree(), lendLimit(a.Rx.RingSize())-z.lent, MaxBurst)
		if want <= 0 {
			return
		}
		keep := lendKeep
		if z.lent < lendFirst {
			// Up to lendFirst without keeping any: the rest of the
			// posting, whenever the guest's writes show, keeps a burst.
			keep, want = 0, min(want, lendFirst-z.lent)
		}
		n, stop := a.Rx.LendBuffers(z.lend[:want], lendMin, keep)
		nf, nb := 0, 0
		for i := 0; i < n; i++ {
			b := z.lend[i]
			f, ok := z.fillAddr(b.Buf)
			if !ok {
				z.back[nb] = virtionet.LentDone{ID: b.ID}
				nb++
				continue
			}
			z.byAddr.put(f+frameHeadroom, b.ID)
			z.fills[nf] = f
			nf++
		}
		if nb > 0 {
			_, _ = a.Rx.CompleteLent(z.back[:nb]) // unused: length 0, not counted
		}
		posted := z.sock.PostFill(z.fills[:nf])
		z.lent += posted
		if posted < nf {
			// FillFree said there was room; the kernel cannot take slots
			// back, so this is a bug: give the rest back unused.
			for i := posted; i < nf; i++ {
				id, _ := z.byAddr.take(z.fills[i] + frameHeadroom)
				z.back[i-posted] = virtionet.LentDone{ID: id}
			}
			_, _ = a.Rx.CompleteLent(z.back[:nf-posted])
		}
		switch stop {
		case virtionet.LendUnfit:
			z.unfit.Store(true)
			slog.Info("vhost: the guest's receive buffers do not fit the zero-copy path (one descriptor of at least frame_len + 12 bytes); its frames on the owned queue are copied",
				"port", z.port, "queue", z.sock.Queue(), "min_bytes", lendMin)
			return
		case virtionet.LendOK:
			z.copying = false
			if n < want {
				return
			}
		case virtionet.LendLogging:
			z.copying = true // the copy path logs its writes
			return
		default:
			z.stopped = true // broken: nothing to lend
			return
		}
	}
}

// fillAddr is the fill address for guest buffer b, if b lies in the
// guest's part of the range with the whole chunk behind the fill address
// inside it too.
func (z *zcRx) fillAddr(b []byte) (uint64, bool) {
	h := hostAddr(b)
	if h < z.base || len(b) < lendMin {
		return 0, false
	}
	off := uint64(h - z.base)
	if off >= z.size || uint64(len(b)) > z.size-off || off < z.area+frameHeadroom-virtionet.HeaderLen {
		return 0, false
	}
	f := off + virtionet.HeaderLen - frameHeadroom
	if f < z.area || f+ownerChunk > z.size {
		return 0, false
	}
	return f, true
}

// abandon is teardown's, once the socket is closed and no worker touches
// z: frames that waited for the VM's queue are lost (counted port_down
// on it), and the VM's queue is told its lent buffers are free to return.
func (z *zcRx) abandon(rx *virtionet.RxQueue) {
	z.c.DropN(DropPortDown, z.ndone)
	z.ndone = 0
	z.flush()
	if rx != nil {
		rx.AbandonLent()
	}
}

// newZC is the zero-copy receive state for the socket of the i-th owned
// queue, over layout l: its frames go to the VM's receive queue of pair i
// mod the device's pairs. nil when the VM's port is not on the switch
// (its frames then take the copy path). Called by bind, with the
// switch's lock held.
func (o *ownerSockets) newZC(l *vhost.MemoryLayout, s *xsk.Socket, i int) *zcRx {
	p := o.sw.byName[o.name]
	if p == nil || len(p.out) == 0 {
		return nil
	}
	pair := i % len(p.out)
	_, area := l.Area()
	return &zcRx{sock: s, base: l.Base(), area: area, size: l.Len(),
		vmq: o.dev.RxQueue(pair), eg: p.out[pair], port: o.name}
}

// retry runs the timer (on) or stops it, and consumes its expirations.
func (z *zcRx) retry(on bool) {
	if z.armed {
		var b [8]byte
		_, _ = unix.Read(z.timer, b[:]) // nonblocking: clears readability
	}
	if on == z.armed {
		return
	}
	var spec unix.ItimerSpec
	if on {
		spec.Interval = unix.NsecToTimespec(int64(lendRetry))
		spec.Value = spec.Interval
	}
	if err := unix.TimerfdSettime(z.timer, 0, &spec, nil); err == nil {
		z.armed = on
	}
}

// watch puts the timer in the NIC queue's epoll set (bind, before the
// socket is attached); unwatch takes it out and closes it (teardown,
// after the worker let go).
func (z *zcRx) watch(epfd int) error {
	fd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
	if err != nil {
		return err
	}
	ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(fd)}
	if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
		unix.Close(fd)
		return err
	}
	z.timer = fd
	return nil
}

func (z *zcRx) unwatch(epfd int) {
	if z.timer > 0 {
		_ = unix.EpollCtl(epfd, unix.EPOLL_CTL_DEL, z.timer, nil)
		unix.Close(z.timer)
		z.timer = 0
	}
}
