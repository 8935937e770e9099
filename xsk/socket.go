package xsk

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// Mode chooses between zero-copy and copy mode at bind time.
type Mode int

const (
	// ModeAuto tries zero-copy and falls back to copy mode when the
	// driver answers EOPNOTSUPP (veth always does).
	ModeAuto Mode = iota
	// ModeZeroCopy forces zero-copy (XDP_ZEROCOPY); binding fails with
	// ErrZeroCopyUnsupported where it is not available.
	ModeZeroCopy
	// ModeCopy forces copy mode (XDP_COPY).
	ModeCopy
)

func (m Mode) String() string {
	switch m {
	case ModeZeroCopy:
		return "zero-copy"
	case ModeCopy:
		return "copy"
	}
	return "auto"
}

// SocketConfig shapes one socket. Ring sizes are powers of two; zero picks
// the default.
type SocketConfig struct {
	// NoRX makes a TX-only socket (no RX ring; a minimal fill ring, which
	// the kernel requires). NoTX makes an RX-only socket: no TX ring, so
	// that poll() on it does not run the TX path.
	NoRX, NoTX bool
	// RXSize, TXSize, FillSize, CompletionSize: ring entries (default
	// 1024; 64 for the fill or completion ring of a socket that does not
	// receive or transmit, which the kernel still requires).
	RXSize, TXSize, FillSize, CompletionSize uint32
	// Frames is how many UMEM frames this socket claims for its own
	// allocator (default: 2*FillSize for RX plus TXSize for TX). More
	// frames than fill slots matter: the kernel publishes its fill-ring
	// consumer index lazily.
	Frames uint32
	// Mode: auto (default), forced zero-copy, forced copy. Sockets
	// sharing the UMEM after the first inherit the first one's mode.
	Mode Mode
	// NoNeedWakeup binds without XDP_USE_NEED_WAKEUP: every TX burst then
	// kicks the kernel.
	NoNeedWakeup bool
	// TXBudget is XDP_MAX_TX_SKB_BUDGET, the descriptors copy-mode TX
	// sends per kick (kernel default 32). Default 256, capped at TXSize;
	// ignored on kernels without the option.
	TXBudget uint32
	// BusyPoll enables busy polling when Usecs > 0.
	BusyPoll BusyPoll
	// ManualFill: Bind, Receive and Release never move the socket's own
	// frames to the fill ring; the caller does, with RefillUpTo, and may
	// post addresses of its own with PostFill (fillmanual.go).
	ManualFill bool
	// CallerTX: the TX ring carries only the caller's own UMEM addresses
	// (TransmitAt), whose completions come back by address (CompleteAt);
	// Transmit, TXReserve and TransmitDescs are refused (txaddr.go).
	CallerTX bool
}

// BusyPoll configures SO_PREFER_BUSY_POLL, SO_BUSY_POLL (microseconds) and
// SO_BUSY_POLL_BUDGET (packets per poll; 0: kernel default).
type BusyPoll struct {
	Usecs  uint32
	Budget uint32
}

const (
	defaultRingSize = 1024
	unusedRingSize  = 64 // fill/completion ring of a socket that does not RX/TX
	defaultTXBudget = 256
)

func (c *SocketConfig) setDefaults() {
	def := func(v *uint32, used bool) {
		if *v == 0 {
			if used {
				*v = defaultRingSize
			} else {
				*v = unusedRingSize
			}
		}
	}
	def(&c.RXSize, !c.NoRX)
	def(&c.FillSize, !c.NoRX)
	def(&c.TXSize, !c.NoTX)
	def(&c.CompletionSize, !c.NoTX)
	if c.Frames == 0 {
		if !c.NoRX {
			c.Frames += 2 * c.FillSize
		}
		if !c.NoTX {
			c.Frames += c.TXSize
		}
	}
	if c.TXBudget == 0 {
		c.TXBudget = defaultTXBudget
	}
	c.TXBudget = min(c.TXBudget, c.TXSize)
}

func (c *SocketConfig) validate() error {
	if c.NoRX && c.NoTX {
		return fmt.Errorf("%w: a socket needs RX or TX", ErrConfig)
	}
	for _, v := range []uint32{c.RXSize, c.TXSize, c.FillSize, c.CompletionSize} {
		if v&(v-1) != 0 {
			return fmt.Errorf("%w: ring size %d is not a power of two", ErrConfig, v)
		}
	}
	return nil
}

// Socket is an AF_XDP socket bound to one (interface, queue), with its
// rings and its share of the UMEM's frames. One goroutine drives it.
type Socket struct {
	umem     *UMEM
	fd       int
	ownsFD   bool // false for the UMEM's registering socket (the UMEM closes it)
	ifindex  int
	queue    int
	cfg      SocketConfig
	zeroCopy bool
	wakeup   bool // bound with XDP_USE_NEED_WAKEUP
	busy     bool // busy polling active

	fill, comp *addrRing
	rx, tx     *descRing

	alloc *frameAlloc
	fifo  *txFIFO

	txBudget     uint32 // XDP_MAX_TX_SKB_BUDGET in force (0: kernel default)
	busyPollNote string
	txReserved   uint32 // TX slots reserved, not yet submitted
	txResIdx     uint32
	callerOut    uint32 // CallerTX: descriptors sent, not completed
	pollFDs      [1]unix.PollFd
	frameCap     uint32 // usable bytes per TX frame
	counters     Counters
	closed       bool
}

// Bind creates a socket on (ifindex, queue) using this UMEM. The first
// socket binds with the UMEM's own registration; later ones share it
// (XDP_SHARED_UMEM) and must be on another queue or interface; each gets
// its own fill and completion rings, as the kernel requires for that.
func (u *UMEM) Bind(ifindex, queue int, cfg SocketConfig) (*Socket, error) {
	if u.closed {
		return nil, ErrClosed
	}
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	for _, o := range u.sockets {
		if o.ifindex == ifindex && o.queue == queue {
			return nil, fmt.Errorf("%w: ifindex %d queue %d", ErrQueueBound, ifindex, queue)
		}
	}
	first, err := u.claim(uint64(cfg.Frames))
	if err != nil {
		return nil, err
	}
	s, err := u.bind(ifindex, queue, cfg, cfg.Mode)
	if err != nil && !u.fdBound && cfg.Mode == ModeAuto && errors.Is(err, ErrZeroCopyUnsupported) {
		s, err = u.bind(ifindex, queue, cfg, ModeCopy)
	}
	if err != nil {
		u.nextFree -= uint64(cfg.Frames)
		return nil, err
	}
	s.alloc = newFrameAlloc(uint64(u.cfg.FrameSize), first, uint64(cfg.Frames))
	if !cfg.NoTX && !cfg.CallerTX {
		s.fifo = newTXFIFO(cfg.TXSize + cfg.CompletionSize)
	}
	s.frameCap = u.cfg.FrameSize
	s.pollFDs[0].Fd = int32(s.fd)
	u.sockets = append(u.sockets, s)
	if s.rx != nil && !cfg.ManualFill {
		s.Refill()
	}
	return s, nil
}

// bind does one attempt. On failure everything it made is undone; a
// failed first bind also replaces the UMEM's registering socket, which
// cannot be given rings a second time.
func (u *UMEM) bind(ifindex, queue int, cfg SocketConfig, mode Mode) (_ *Socket, err error) {
	shared := u.fdBound
	s := &Socket{umem: u, ifindex: ifindex, queue: queue, cfg: cfg, fd: u.fd}
	if shared {
		s.fd, err = unix.Socket(unix.AF_XDP, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return nil, fmt.Errorf("xsk: socket(AF_XDP): %w", err)
		}
		s.ownsFD = true
	}
	defer func() {
		if err == nil {
			return
		}
		s.unmapRings()
		if shared {
			unix.Close(s.fd)
		} else if rerr := u.newOwnerFD(); rerr != nil {
			err = errors.Join(err, rerr)
		}
	}()
	if err = s.setupRings(); err != nil {
		return nil, err
	}

	sa := &unix.SockaddrXDP{Ifindex: uint32(ifindex), QueueID: uint32(queue)}
	if shared {
		sa.Flags = unix.XDP_SHARED_UMEM
		sa.SharedUmemFD = uint32(u.fd)
	} else {
		if !cfg.NoNeedWakeup {
			sa.Flags |= unix.XDP_USE_NEED_WAKEUP
		}
		switch mode {
		case ModeAuto, ModeZeroCopy:
			sa.Flags |= unix.XDP_ZEROCOPY
		case ModeCopy:
			sa.Flags |= unix.XDP_COPY
		}
	}
	if err = unix.Bind(s.fd, sa); err != nil {
		if errors.Is(err, unix.EOPNOTSUPP) && sa.Flags&unix.XDP_ZEROCOPY != 0 {
			return nil, fmt.Errorf("%w: ifindex %d queue %d: %w", ErrZeroCopyUnsupported, ifindex, queue, err)
		}
		return nil, fmt.Errorf("xsk: bind ifindex %d queue %d (flags %#x): %w", ifindex, queue, sa.Flags,
			os.NewSyscallError("bind", err))
	}
	if !shared {
		u.fdBound = true
		s.wakeup = !cfg.NoNeedWakeup
	} else {
		s.wakeup = u.sockets[0].wakeup
	}
	if opts, oerr := unix.GetsockoptInt(s.fd, unix.SOL_XDP, unix.XDP_OPTIONS); oerr == nil {
		s.zeroCopy = opts&unix.XDP_OPTIONS_ZEROCOPY != 0
	}
	s.setTXBudget()
	s.setBusyPoll()
	return s, nil
}

// setupRings sizes the four rings, then maps them.
func (s *Socket) setupRings() error {
	c := &s.cfg
	set := func(opt int, n uint32, name string) error {
		if err := unix.SetsockoptInt(s.fd, unix.SOL_XDP, opt, int(n)); err != nil {
			return fmt.Errorf("xsk: setsockopt %s=%d: %w", name, n, err)
		}
		return nil
	}
	if err := set(unix.XDP_UMEM_FILL_RING, c.FillSize, "XDP_UMEM_FILL_RING"); err != nil {
		return err
	}
	if err := set(unix.XDP_UMEM_COMPLETION_RING, c.CompletionSize, "XDP_UMEM_COMPLETION_RING"); err != nil {
		return err
	}
	if !c.NoRX {
		if err := set(unix.XDP_RX_RING, c.RXSize, "XDP_RX_RING"); err != nil {
			return err
		}
	}
	if !c.NoTX {
		if err := set(unix.XDP_TX_RING, c.TXSize, "XDP_TX_RING"); err != nil {
			return err
		}
	}
	off, err := getsockoptMmapOffsets(s.fd)
	if err != nil {
		return fmt.Errorf("xsk: XDP_MMAP_OFFSETS: %w", err)
	}
	mem, err := mapRing(s.fd, unix.XDP_UMEM_PGOFF_FILL_RING, ringMapLen(off.Fr, c.FillSize, 8))
	if err != nil {
		return err
	}
	if s.fill, err = newAddrRing(mem, off.Fr, c.FillSize); err != nil {
		_ = unix.Munmap(mem)
		return err
	}
	if mem, err = mapRing(s.fd, unix.XDP_UMEM_PGOFF_COMPLETION_RING, ringMapLen(off.Cr, c.CompletionSize, 8)); err != nil {
		return err
	}
	if s.comp, err = newAddrRing(mem, off.Cr, c.CompletionSize); err != nil {
		_ = unix.Munmap(mem)
		return err
	}
	if !c.NoRX {
		if mem, err = mapRing(s.fd, unix.XDP_PGOFF_RX_RING, ringMapLen(off.Rx, c.RXSize, descSize)); err != nil {
			return err
		}
		if s.rx, err = newDescRing(mem, off.Rx, c.RXSize); err != nil {
			_ = unix.Munmap(mem)
			return err
		}
	}
	if !c.NoTX {
		if mem, err = mapRing(s.fd, unix.XDP_PGOFF_TX_RING, ringMapLen(off.Tx, c.TXSize, descSize)); err != nil {
			return err
		}
		if s.tx, err = newDescRing(mem, off.Tx, c.TXSize); err != nil {
			_ = unix.Munmap(mem)
			return err
		}
	}
	return nil
}

func (s *Socket) unmapRings() {
	if s.fill != nil {
		_ = unix.Munmap(s.fill.mem)
		s.fill = nil
	}
	if s.comp != nil {
		_ = unix.Munmap(s.comp.mem)
		s.comp = nil
	}
	if s.rx != nil {
		_ = unix.Munmap(s.rx.mem)
		s.rx = nil
	}
	if s.tx != nil {
		_ = unix.Munmap(s.tx.mem)
		s.tx = nil
	}
}

// Close unmaps the rings and closes the socket (the UMEM's registering
// socket stays open until the UMEM closes). Frames the socket held are
// simply forgotten.
func (s *Socket) Close() error {
	if s.closed {
		return nil
	}
	s.closed = true
	s.unmapRings()
	if s.ownsFD {
		return unix.Close(s.fd)
	}
	return nil
}

// FD is the socket's file descriptor: put it in the XSKMAP, or in an epoll
// set for the idle mode.
func (s *Socket) FD() int { return s.fd }

// Ifindex and Queue say where the socket is bound.
func (s *Socket) Ifindex() int { return s.ifindex }

// Queue is the queue the socket is bound to.
func (s *Socket) Queue() int { return s.queue }

// ZeroCopy reports the mode obtained (XDP_OPTIONS_ZEROCOPY).
func (s *Socket) ZeroCopy() bool { return s.zeroCopy }

// NeedWakeup reports whether the socket was bound with XDP_USE_NEED_WAKEUP.
func (s *Socket) NeedWakeup() bool { return s.wakeup }

// UMEM is the UMEM the socket uses.
func (s *Socket) UMEM() *UMEM { return s.umem }

// FreeFrames is how many of the socket's frames are in its stash.
func (s *Socket) FreeFrames() int { return s.alloc.free() }

// FramesOwned is how many UMEM frames the socket's allocator owns.
func (s *Socket) FramesOwned() int { return int(s.alloc.count) }
