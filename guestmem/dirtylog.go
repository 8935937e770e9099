package guestmem

import (
	"fmt"
	"sync/atomic"
)

// LogPageShift is the page size of a vhost dirty log: one bit per 4 KiB of
// guest-physical memory, whatever the guest's or the host's page size
// (vhost-user.rst, "Migration"; QEMU's VHOST_LOG_PAGE).
const LogPageShift = 12

// DirtyLog is the dirty page log a vhost-user front-end shares during live
// migration (SET_LOG_BASE): bit p of the bitmap, counted in 64-bit
// little-endian words, says guest-physical page p was written. The
// front-end reads and clears it concurrently (QEMU exchanges each word with
// zero), so every mark is an atomic OR of a whole word: a bit set here is
// never lost to the front-end's clear of a neighbour.
//
// A mark comes after the write it records: a front-end that clears a bit
// and copies the page before the write lands sees the bit again in its
// next pass. The log is the front-end's memory and may be smaller than the
// guest memory it should cover; marks beyond it are not written, only
// counted (Missed), because there is nowhere to put them.
type DirtyLog struct {
	words  []uint64
	missed atomic.Uint64
	// host is the log area itself, for Contains (fault attribution: a
	// front-end can truncate the file behind it).
	host []byte
}

// NewDirtyLog returns a log over area, the front-end's shared log memory
// as mapped in this process. area must be 8-byte aligned and a multiple
// of 8 bytes long, so that every word can be updated atomically.
func NewDirtyLog(area []byte) (*DirtyLog, error) {
	if len(area) == 0 || len(area)%8 != 0 || !Aligned(area, 8) {
		return nil, fmt.Errorf("%w: a dirty log of %d bytes must be a non-empty multiple of 8 bytes, 8-byte aligned", ErrBadTable, len(area))
	}
	return &DirtyLog{words: asWords(area), host: area}, nil
}

// Covers is how many bytes of guest-physical address space, from 0, the
// log has bits for.
func (l *DirtyLog) Covers() uint64 {
	return uint64(len(l.words)) * 64 << LogPageShift
}

// Missed is how many page marks fell beyond the log.
func (l *DirtyLog) Missed() uint64 { return l.missed.Load() }

// Contains reports whether host address addr lies in the log area.
func (l *DirtyLog) Contains(addr uintptr) bool { return hostContains(l.host, addr) }

// Mark records that the guest-physical bytes [gpa, gpa+n) were written.
// It sets one bit per page, ORing a word's bits at once. It does not
// allocate and never writes outside the log.
func (l *DirtyLog) Mark(gpa, n uint64) {
	if n == 0 {
		return
	}
	first := gpa >> LogPageShift
	last := (gpa + n - 1) >> LogPageShift
	if gpa+n-1 < gpa { // wraps: a guest address near 2^64
		last = ^uint64(0) >> LogPageShift
	}
	for p := first; p <= last; {
		w := p / 64
		if w >= uint64(len(l.words)) {
			l.missed.Add(last - p + 1)
			return
		}
		// Bits p%64 .. min(last, end of this word)%64.
		hi := min(last, w*64+63)
		bits := (^uint64(0) >> (63 - (hi - p))) << (p % 64)
		atomic.OrUint64(&l.words[w], bits)
		if hi == ^uint64(0)>>LogPageShift {
			return
		}
		p = hi + 1
	}
}

// IsDirty reports whether page p's bit is set (tests, and front-ends
// played by tests).
func (l *DirtyLog) IsDirty(gpa uint64) bool {
	p := gpa >> LogPageShift
	if p/64 >= uint64(len(l.words)) {
		return false
	}
	return atomic.LoadUint64(&l.words[p/64])&(1<<(p%64)) != 0
}
