package vhost

import (
	"fmt"
	"math"

	"golang.org/x/sys/unix"

	"github.com/xvswitch/xvswitch/guestmem"
)

// Live migration: while the front-end has VHOST_F_LOG_ALL negotiated, every
// guest byte the device writes is marked in the dirty log the front-end
// shared with SET_LOG_BASE (LOG_SHMFD: an fd, a size and an offset), so
// that it copies those pages again (docs/vms.md, "Live migration"). The
// log reaches the data path with the memory table: the rings are built
// over s.mem with the log attached (ringMem), so a new log, or logging
// turned on or off, pauses the rings, rebuilds them from their saved
// state and unmaps the old log only once no poller can reach it, exactly
// as a new memory table does.

// logArea is a front-end's dirty log mapped into this process.
type logArea struct {
	raw []byte // the whole mmap, from the page holding mmap_offset
	log *guestmem.DirtyLog
}

// maxLogSize bounds the log a device maps: one bit per 4 KiB of the
// guest-physical space MaxMemory allows, and a page to spare. A guest's
// physical addresses can lie above its memory's size (the hole below 4
// GiB), which the spare covers for the sizes QEMU uses; a larger log is
// refused as hostile.
func maxLogSize(maxMemory uint64) uint64 {
	return maxMemory>>guestmem.LogPageShift/8 + 1<<22
}

// mapLog maps size bytes at offset of fd, the payload of SET_LOG_BASE.
// The fd is always closed.
func mapLog(fd int, size, offset, limit uint64) (*logArea, error) {
	defer unix.Close(fd)
	if size == 0 || size%8 != 0 || offset%8 != 0 {
		return nil, fmt.Errorf("%w: dirty log of %d bytes at offset %d: needs a non-zero multiple of 8 at an 8-byte aligned offset", ErrBadLog, size, offset)
	}
	if size > limit {
		return nil, fmt.Errorf("%w: dirty log of %d bytes, more than the %d the device's MaxMemory needs", ErrBadLog, size, limit)
	}
	end := offset + size
	if end < offset || end > math.MaxInt64 {
		return nil, fmt.Errorf("%w: dirty log at offset %#x of %#x bytes overflows", ErrBadLog, offset, size)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("%w: fstat log fd: %v", ErrBadLog, err)
	}
	// A log page past the end of the file would SIGBUS on the first mark.
	// (A front-end can still truncate it later: the fault is then
	// attributed to this guest through Memory.ContainsHost.)
	if st.Mode&unix.S_IFMT != unix.S_IFREG || uint64(st.Size) < end {
		return nil, fmt.Errorf("%w: dirty log ends at %#x but its fd is not a file that long (mode %#o, %d bytes)", ErrBadLog, end, st.Mode, st.Size)
	}
	pg := uint64(unix.Getpagesize())
	start := offset &^ (pg - 1)
	length := (end+pg-1)&^(pg-1) - start
	raw, err := unix.Mmap(fd, int64(start), int(length), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("%w: mmap %d bytes of dirty log: %v", ErrBadLog, length, err)
	}
	head := offset - start
	log, err := guestmem.NewDirtyLog(raw[head : head+size : head+size])
	if err != nil {
		_ = unix.Munmap(raw)
		return nil, fmt.Errorf("%w: %v", ErrBadLog, err)
	}
	return &logArea{raw: raw, log: log}, nil
}

func (a *logArea) unmap() {
	if a != nil && a.raw != nil {
		_ = unix.Munmap(a.raw)
		a.raw = nil
	}
}

// logging reports whether the device's writes are to be logged now.
func (s *session) logging() bool {
	return s.features&(1<<FeatureLogAll) != 0 && s.log != nil
}

// ringMem is the memory table rings are built over: the session's, with
// the dirty log attached while logging is on. The logged copy is made
// once per table and log.
func (s *session) ringMem() *guestmem.Memory {
	if s.mem == nil || !s.logging() {
		return s.mem
	}
	if s.loggedOf != s.mem || s.logged.Log() != s.log.log {
		s.logged, s.loggedOf = s.mem.WithLog(s.log.log), s.mem
	}
	return s.logged
}

// ownsLog reports whether addr lies in the session's dirty log.
func (s *session) ownsLog(addr uintptr) bool {
	return s.log != nil && s.log.log.Contains(addr)
}

// setLogBase maps the log of SET_LOG_BASE and moves the rings onto it if
// they log, then unmaps the log it replaces once no poller can reach it.
func (d *Device) setLogBase(s *session, m *message) error {
	if !s.hasProto(ProtoLogShmFD) {
		return fmt.Errorf("%w: SET_LOG_BASE without LOG_SHMFD negotiated (a log address in our own memory means nothing)", ErrBadLog)
	}
	if err := needSize(m, 16); err != nil {
		return err
	}
	size, offset := le.Uint64(m.payload[0:]), le.Uint64(m.payload[8:])
	fd := m.takeFD()
	if fd < 0 {
		return fmt.Errorf("%w: SET_LOG_BASE without an fd", ErrBadFDs)
	}
	area, err := mapLog(fd, size, offset, maxLogSize(d.cfg.MaxMemory))
	if err != nil {
		return err
	}
	if s.mem != nil {
		if top := memoryTop(s.mem); area.log.Covers() < top {
			d.log.Warn("vhost dirty log smaller than guest memory: writes above it cannot be logged", "log_covers", area.log.Covers(), "memory_ends", top)
		}
	}
	was := s.logging()
	old := s.log
	s.log = area
	ok := true
	var rerr error
	if was || s.logging() {
		_, ok = d.pauseAll()
		rerr = d.restartAll(s)
	}
	if ok {
		old.unmap()
	} else if old != nil {
		d.log.Error("vhost: old dirty log left mapped: a poller still held it")
	}
	d.log.Info("vhost dirty log set", "bytes", size, "covers", area.log.Covers())
	return rerr
}

// setLogFD keeps the fd of SET_LOG_FD (Linux's vhost signals it when it
// wrote the log; QEMU's vhost-user code never sends it and reads the log
// on its own schedule, so it is never written, only held until replaced
// or the session ends).
func (d *Device) setLogFD(s *session, m *message) error {
	fd := m.takeFD()
	if fd < 0 {
		return fmt.Errorf("%w: SET_LOG_FD without an fd", ErrBadFDs)
	}
	if err := checkEventFD(fd); err != nil {
		closeFD(fd)
		return fmt.Errorf("%w: SET_LOG_FD: %v", ErrBadFDs, err)
	}
	closeFD(s.logFD)
	s.logFD = fd
	return nil
}

// endLog releases the session's log (its end). Called once no poller can
// reach it, or not at all (then it is left mapped, as the memory is).
func (s *session) endLog() {
	s.log.unmap()
	s.log = nil
	s.logged, s.loggedOf = nil, nil
	closeFD(s.logFD)
	s.logFD = -1
}

// memoryTop is the end of the highest guest-physical region of mem.
func memoryTop(mem *guestmem.Memory) uint64 {
	var top uint64
	for _, r := range mem.Regions() {
		top = max(top, r.GuestAddr+r.Size)
	}
	return top
}
