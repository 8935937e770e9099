package xsk

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// UMEMConfig shapes a UMEM.
type UMEMConfig struct {
	// FrameSize is the chunk size: 2048 or 4096 (default 4096).
	FrameSize uint32
	// NumFrames is the number of frames (default 4096). Ignored by
	// NewUMEMFromMemory, which derives it from the memory's length.
	NumFrames uint32
	// Headroom is reserved in front of every received frame, after the
	// kernel's own XDP_PACKET_HEADROOM (256 bytes); at most
	// FrameSize - MinTailroom, the kernel's limit (MaxHeadroom).
	Headroom uint32
	// Unaligned selects XDP_UMEM_UNALIGNED_CHUNK_FLAG: descriptors may
	// point anywhere in the UMEM (across frame boundaries), as guest
	// memory used as UMEM needs. The allocator still hands out
	// frame-aligned chunks.
	Unaligned bool
}

// UMEM is a region of memory registered with the kernel for AF_XDP, plus
// the bookkeeping of which sockets use which of its frames. The first
// socket bound owns the registration; later ones share it
// (XDP_SHARED_UMEM) on other queues or interfaces.
//
// A UMEM and its sockets are set up and closed by one goroutine; after
// setup each Socket may be driven by its own goroutine.
type UMEM struct {
	cfg      UMEMConfig
	mem      []byte
	ownsMem  bool // mem was mapped by us: unmap on Close
	fd       int  // the registering socket; the first Bind uses it
	fdBound  bool // fd is bound: further Binds share it
	nextFree uint64
	nframes  uint64
	sockets  []*Socket
	closed   bool
}

const pageSize = 4096

// MinTailroom is what XDP_UMEM_REG insists on behind the configured
// headroom in every chunk (by our reading of xdp_umem_reg:
// XDP_PACKET_HEADROOM 256, an aligned skb_shared_info 320 and 128 bytes
// of frame). Measured on 6.18:
// headroom chunk-704 registers, chunk-703 is EINVAL, for 2048- and
// 4096-byte chunks alike (TestHeadroomLimitMatchesKernel;
// docs/zerocopy-kernel.md).
const MinTailroom = 704

// MaxHeadroom is the largest Headroom a UMEM of chunk-byte frames accepts.
func MaxHeadroom(chunk uint32) uint32 {
	if chunk < MinTailroom {
		return 0
	}
	return chunk - MinTailroom
}

func (c *UMEMConfig) setDefaults() {
	if c.FrameSize == 0 {
		c.FrameSize = 4096
	}
	if c.NumFrames == 0 {
		c.NumFrames = 4096
	}
}

func (c *UMEMConfig) validate() error {
	if c.FrameSize != 2048 && c.FrameSize != 4096 {
		return fmt.Errorf("%w: frame size %d (want 2048 or 4096)", ErrConfig, c.FrameSize)
	}
	if c.Headroom > MaxHeadroom(c.FrameSize) {
		return fmt.Errorf("%w: headroom %d above %d, the most the kernel accepts in %d-byte chunks",
			ErrConfig, c.Headroom, MaxHeadroom(c.FrameSize), c.FrameSize)
	}
	return nil
}

// NewUMEM maps NumFrames*FrameSize bytes of anonymous memory (populated,
// so the kernel can pin it at once) and registers it.
func NewUMEM(cfg UMEMConfig) (*UMEM, error) {
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	size := (uint64(cfg.NumFrames)*uint64(cfg.FrameSize) + pageSize - 1) &^ (pageSize - 1)
	mem, err := unix.Mmap(-1, 0, int(size), unix.PROT_READ|unix.PROT_WRITE,
		unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_POPULATE)
	if err != nil {
		return nil, fmt.Errorf("xsk: mmap UMEM of %d bytes: %w", size, err)
	}
	u, err := register(mem, cfg)
	if err != nil {
		_ = unix.Munmap(mem)
		return nil, err
	}
	u.ownsMem = true
	return u, nil
}

// NewUMEMFromMemory registers memory the caller mapped, e.g. a VM's shared
// memory mapped contiguously, so frames can be received into and sent from
// it without a copy. Requirements:
//   - mem starts on a page boundary (the kernel refuses anything else);
//   - its length is a multiple of cfg.FrameSize (aligned mode requires it;
//     in unaligned mode a tail shorter than a frame is simply not used by
//     the allocator);
//   - it stays mapped, at the same address, until the UMEM is closed: the
//     kernel pins the pages at registration and the rings carry offsets
//     into it;
//   - pages are charged to RLIMIT_MEMLOCK like any UMEM.
//
// The UMEM never unmaps caller memory.
func NewUMEMFromMemory(mem []byte, cfg UMEMConfig) (*UMEM, error) {
	if cfg.FrameSize == 0 {
		cfg.FrameSize = 4096
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if len(mem) == 0 || baseAddr(mem)%pageSize != 0 {
		return nil, fmt.Errorf("%w: caller memory at %#x is not page-aligned", ErrConfig, baseAddr(mem))
	}
	if !cfg.Unaligned && uint64(len(mem))%uint64(cfg.FrameSize) != 0 {
		return nil, fmt.Errorf("%w: caller memory of %d bytes is not a multiple of the %d-byte frame (aligned mode)",
			ErrConfig, len(mem), cfg.FrameSize)
	}
	cfg.NumFrames = uint32(uint64(len(mem)) / uint64(cfg.FrameSize))
	return register(mem, cfg)
}

// register creates the owning socket and registers mem with it.
func register(mem []byte, cfg UMEMConfig) (*UMEM, error) {
	u := &UMEM{cfg: cfg, mem: mem, nframes: uint64(cfg.NumFrames), fd: -1}
	if err := u.newOwnerFD(); err != nil {
		return nil, err
	}
	return u, nil
}

// newOwnerFD (re)creates the socket that registers the UMEM. A socket whose
// bind failed cannot be given rings again, so a failed first Bind replaces
// it with a fresh one.
func (u *UMEM) newOwnerFD() error {
	fd, err := unix.Socket(unix.AF_XDP, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("xsk: socket(AF_XDP): %w", err)
	}
	var flags uint32
	if u.cfg.Unaligned {
		flags |= unix.XDP_UMEM_UNALIGNED_CHUNK_FLAG
	}
	if err := setsockoptUMEMReg(fd, u.mem, u.cfg.FrameSize, u.cfg.Headroom, flags); err != nil {
		unix.Close(fd)
		return u.regError(err)
	}
	if u.fd >= 0 {
		unix.Close(u.fd)
	}
	u.fd = fd
	return nil
}

func (u *UMEM) regError(err error) error {
	if errors.Is(err, unix.ENOBUFS) || errors.Is(err, unix.EPERM) {
		lim, capOK := memlockState()
		if errors.Is(err, unix.ENOBUFS) || !capOK {
			return &MemlockError{Need: uint64(len(u.mem)), Limit: lim, HasIPCLock: capOK, Errno: err}
		}
	}
	if errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("%w: XDP_UMEM_REG of %d bytes at %#x, frame %d, headroom %d, unaligned %v: %w",
			ErrConfig, len(u.mem), baseAddr(u.mem), u.cfg.FrameSize, u.cfg.Headroom, u.cfg.Unaligned, err)
	}
	return fmt.Errorf("xsk: XDP_UMEM_REG: %w", os.NewSyscallError("setsockopt", err))
}

// Memory is the UMEM's bytes; descriptor addresses are offsets into it.
func (u *UMEM) Memory() []byte { return u.mem }

// FrameSize is the chunk size.
func (u *UMEM) FrameSize() uint32 { return u.cfg.FrameSize }

// Headroom is the configured headroom (in front of received frames, after
// the kernel's 256 bytes).
func (u *UMEM) Headroom() uint32 { return u.cfg.Headroom }

// NumFrames is the number of frames in the UMEM.
func (u *UMEM) NumFrames() uint32 { return uint32(u.nframes) }

// UnclaimedFrames is how many frames no socket has claimed yet.
func (u *UMEM) UnclaimedFrames() uint32 { return uint32(u.nframes - u.nextFree) }

// claim hands out the next n frames as [first, first+n).
func (u *UMEM) claim(n uint64) (first uint64, err error) {
	if n > u.nframes-u.nextFree {
		return 0, fmt.Errorf("%w: socket wants %d frames, %d of %d left", ErrNoFrames, n, u.nframes-u.nextFree, u.nframes)
	}
	first = u.nextFree
	u.nextFree += n
	return first, nil
}

// Close closes every socket bound on the UMEM, then the registration, and
// unmaps the memory if NewUMEM mapped it.
func (u *UMEM) Close() error {
	if u.closed {
		return nil
	}
	u.closed = true
	var errs []error
	for _, s := range u.sockets {
		errs = append(errs, s.Close())
	}
	u.sockets = nil
	if u.fd >= 0 {
		errs = append(errs, unix.Close(u.fd))
		u.fd = -1
	}
	if u.ownsMem {
		errs = append(errs, unix.Munmap(u.mem))
	}
	u.mem = nil
	return errors.Join(errs...)
}
