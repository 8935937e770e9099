package vhost

import (
	"time"
)

// DefaultMemoryChangeTimeout is Config.MemoryChangeTimeout's default.
const DefaultMemoryChangeTimeout = time.Second

// MemoryLayout is a guest memory table mapped as one range
// (Config.Contiguous), for an owner that registers the range as an AF_XDP
// UMEM: where the range is, the switch-owned area at its start, and where
// each region lies in it. It is immutable. The range stays mapped until
// the Config.OnMemoryChange call that replaces this layout has returned
// (or, if that call is late, until it returns), and not longer.
type MemoryLayout struct {
	gen     uint64
	mem     []byte
	area    uint64
	regions []LayoutRegion
}

// LayoutRegion is one guest memory region in a MemoryLayout.
type LayoutRegion struct {
	GuestAddr uint64 // guest physical address of the region's first byte
	Size      uint64 // bytes
	UserAddr  uint64 // the front-end's virtual address of the first byte
	// Offset is where the region's first byte lies in the range. The
	// region's pages start at Offset rounded down to the page size (its
	// mmap_offset need not be page aligned) and are aligned to the huge
	// page size on hugetlbfs.
	Offset uint64
}

// Generation identifies the table: it changes with every table the device
// maps (SET_MEM_TABLE, ADD_MEM_REG, REM_MEM_REG) and at the end of each
// session, and is never reused by the device.
func (l *MemoryLayout) Generation() uint64 { return l.gen }

// Range is the whole range: every byte of it is mapped read-write (no
// PROT_NONE hole) and it starts on a page (a huge page if a region is on
// hugetlbfs). Writing into it outside the area writes guest memory.
func (l *MemoryLayout) Range() []byte { return l.mem }

// Len is the range's length in bytes, a multiple of the page size.
func (l *MemoryLayout) Len() uint64 { return uint64(len(l.mem)) }

// Area is the switch-owned memory at the start of the range, offset 0 and
// the size asked for in Config.SwitchArea rounded up to a page: shared
// anonymous memory of this process that no guest sees. (The gaps before
// hugetlbfs regions are switch-owned too, and unused.)
func (l *MemoryLayout) Area() (offset, size uint64) { return 0, l.area }

// Regions lists the regions in the order they lie in the range (the order
// of the memory table, added regions last). The slice is a copy.
func (l *MemoryLayout) Regions() []LayoutRegion {
	return append([]LayoutRegion(nil), l.regions...)
}

// Offset returns the range offset of guest physical bytes [gpa, gpa+n)
// when they lie in one region.
func (l *MemoryLayout) Offset(gpa, n uint64) (uint64, bool) {
	for _, r := range l.regions {
		if off := gpa - r.GuestAddr; off < r.Size && n <= r.Size-off {
			return r.Offset + off, true
		}
	}
	return 0, false
}

// MemoryChange is what Config.OnMemoryChange learns: the device's memory
// table is being replaced. Old is the layout going away (nil if there was
// none), New the one replacing it (nil when the device has no memory any
// more: the session ended, or REM_MEM_REG removed the last region).
// Generation is New's, or the generation of "no memory" when New is nil.
type MemoryChange struct {
	Generation uint64
	Old, New   *MemoryLayout
}

// MemoryLayout returns the layout of the current memory table, nil without
// one or without Config.Contiguous. It takes no lock: it may be called
// from anywhere, OnMemoryChange included.
func (d *Device) MemoryLayout() *MemoryLayout { return d.layout.Load() }

// changeMemory publishes the session's new range (nil: none), tells the
// owner, and then frees what the old table held: the retired mappings
// (their pages, or with a range only their fds) and the old range. It is
// called with every ring paused, before the rings restart over the new
// table. released false means a poller did not let go of the old table:
// then nothing is freed. The owner's hook is bounded by
// Config.MemoryChangeTimeout: when it is late the control path goes on, and
// the old memory is freed when the hook returns, never before.
func (d *Device) changeMemory(oldRng, newRng *memRange, retire []*mapping, released bool) {
	free := func() {
		if !released {
			if len(retire) > 0 || oldRng != nil {
				d.log.Error("vhost: old guest memory left mapped: a poller still held it", "regions", len(retire))
			}
			return
		}
		unmapAll(retire)
		oldRng.unmap()
	}
	if !d.cfg.Contiguous || (oldRng == nil && newRng == nil) {
		free()
		return
	}
	d.memGen++
	ch := MemoryChange{Generation: d.memGen}
	if oldRng != nil {
		ch.Old = oldRng.layout
	}
	if newRng != nil {
		newRng.layout.gen = d.memGen
		ch.New = newRng.layout
	}
	d.layout.Store(ch.New)
	hook := d.cfg.OnMemoryChange
	if hook == nil {
		free()
		return
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		hook(ch)
	}()
	t := time.NewTimer(d.cfg.MemoryChangeTimeout)
	defer t.Stop()
	select {
	case <-done:
		free()
	case <-t.C:
		d.log.Error("vhost: OnMemoryChange did not return in time; the old guest memory stays mapped until it does",
			"timeout", d.cfg.MemoryChangeTimeout, "generation", ch.Generation)
		go func() {
			<-done
			free()
			d.log.Info("vhost: OnMemoryChange returned late; old guest memory unmapped", "generation", ch.Generation)
		}()
	}
}
