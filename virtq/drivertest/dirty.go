package drivertest

import (
	"fmt"
	"sync/atomic"
	"unsafe"

	"github.com/xvswitch/xvswitch/guestmem"
	"github.com/xvswitch/xvswitch/virtq"
)

// Log is a dirty log over a Mem, as a migrating front-end shares it, with
// the front-end's view of it: Dirty, Clear. Tests of a device's write
// paths build rings over Logged and compare memory before and after the
// device ran (Snapshot, ChangedPages): every changed page must be Dirty.
type Log struct {
	*guestmem.DirtyLog
	words []uint64
}

// NewLog returns a log covering every region of m.
func NewLog(m *Mem) *Log {
	var top uint64
	for _, r := range m.Regions {
		top = max(top, r.GuestAddr+r.Size)
	}
	words := make([]uint64, (top>>guestmem.LogPageShift+63)/64)
	l, err := guestmem.NewDirtyLog(unsafe.Slice((*byte)(unsafe.Pointer(&words[0])), 8*len(words)))
	if err != nil {
		panic(err) // a []uint64 is aligned and a multiple of 8 long
	}
	return &Log{DirtyLog: l, words: words}
}

// Logged is m's memory table with l attached: rings built over it log.
func (l *Log) Logged(m *Mem) *guestmem.Memory { return m.WithLog(l.DirtyLog) }

// Dirty reports whether the page of gpa is marked.
func (l *Log) Dirty(gpa uint64) bool { return l.IsDirty(gpa) }

// Clear zeroes the log as a front-end's sync does.
func (l *Log) Clear() {
	for i := range l.words {
		atomic.StoreUint64(&l.words[i], 0)
	}
}

// Snapshot copies every region's bytes.
func (m *Mem) Snapshot() [][]byte {
	out := make([][]byte, len(m.Regions))
	for i, r := range m.Regions {
		out[i] = append([]byte(nil), r.Host[:r.Size]...)
	}
	return out
}

// ChangedPages returns the guest address of every 4 KiB guest page whose
// bytes differ from snap.
func (m *Mem) ChangedPages(snap [][]byte) []uint64 {
	var out []uint64
	for i, r := range m.Regions {
		old, now := snap[i], r.Host[:r.Size]
		for a := uint64(0); a < r.Size; {
			e := min(r.Size, ((r.GuestAddr+a)|4095)+1-r.GuestAddr)
			if string(old[a:e]) != string(now[a:e]) {
				out = append(out, (r.GuestAddr+a)&^4095)
			}
			a = e
		}
	}
	return out
}

// DeviceRound plays one round of a device on r while l logs: it clears l,
// pops what the driver made available, pushes every chain back as used
// (its whole writable part), asks for kicks (on or off), and returns the
// pages the ring changed in m; err names the first of them l did not mark.
func (l *Log) DeviceRound(m *Mem, r virtq.Ring, kicks bool) ([]uint64, error) {
	l.Clear()
	snap := m.Snapshot()
	var b virtq.Burst
	n, err := r.Pop(&b, virtq.MaxBurst)
	if err != nil {
		return nil, err
	}
	used := make([]virtq.Used, n)
	for i := range used {
		c := &b.Chains[i]
		used[i] = virtq.Used{ID: c.ID, Descs: c.Descs, Len: c.WriteLen}
	}
	if err := r.Push(used); err != nil {
		return nil, err
	}
	if kicks {
		r.EnableKicks()
	} else {
		r.DisableKicks()
	}
	changed := m.ChangedPages(snap)
	for _, gpa := range changed {
		if !l.Dirty(gpa) {
			return changed, fmt.Errorf("page %#x written by the ring, not in the dirty log", gpa)
		}
	}
	return changed, nil
}
