package vhosttest

import (
	"errors"

	"golang.org/x/sys/unix"

	"github.com/xvswitch/xvswitch/virtq/drivertest"
)

// Ring operations return these instead of touching guest memory that is
// no longer there, which would fault the test itself.
var (
	// ErrTruncated: TruncateMemory shrank the guest's memory.
	ErrTruncated = errors.New("vhosttest: guest memory truncated")
	// ErrFreed: the front-end closed (or reconnected) and unmapped the
	// memory this ring was in.
	ErrFreed = errors.New("vhosttest: guest memory freed")
)

const defaultBufSize = 2048

// guest is the memory behind one connection: the regions, the memfds that
// back them (sent with SET_MEM_TABLE), and the pool of frame buffers Send
// and PostRx take from region bufRegion.
type guest struct {
	mem    *drivertest.Mem
	fds    []int
	offset uint64 // of every region in its memfd (Options.MmapOffset)
	dead   error  // ErrTruncated or ErrFreed: do not touch mem

	bufRegion int
	bufSize   int
	free      []uint64 // buffers back from the device, for reuse

	// Regions added after NewMemory (AddRegion), by guest address: their
	// mappings and allocators are the front-end's, not drivertest's.
	hot map[uint64]*hotRegion
	// gone[i]: mem.Regions[i] was removed (RemoveRegion). mem.Regions
	// never shrinks, so that drivertest's allocator indexes stay valid;
	// mem.Memory translates only the regions still there, and fds[i] is
	// -1 for a removed one.
	gone map[int]bool
}

// live returns the indexes in mem.Regions of the regions still there, in
// order: Regions()[k] is mem.Regions[live()[k]].
func (g *guest) live() []int {
	var out []int
	for i := range g.mem.Regions {
		if !g.gone[i] {
			out = append(out, i)
		}
	}
	return out
}

// alloc returns a buffer of bufSize bytes, reusing one the device gave
// back before carving a new one: the pool never grows past what the rings
// hold at once, so a long test does not run out of memory.
func (g *guest) alloc() uint64 {
	if n := len(g.free); n > 0 {
		b := g.free[n-1]
		g.free = g.free[:n-1]
		return b
	}
	if h := g.hot[g.mem.Regions[g.bufRegion].GuestAddr]; h != nil {
		return h.alloc(uint64(g.bufSize), 64)
	}
	return g.mem.Alloc(g.bufRegion, uint64(g.bufSize), 64)
}

// release takes buffers back into the pool, those of the region the pool
// takes from now: a buffer of another region (UseBufferRegion moved the
// pool, or the region is gone) is not used again.
func (g *guest) release(bufs []uint64) {
	r := g.mem.Regions[g.bufRegion]
	for _, b := range bufs {
		if b-r.GuestAddr < r.Size {
			g.free = append(g.free, b)
		}
	}
}

// NewMemory creates guest memory: one memfd-backed region per size, at
// distinct guest addresses, without telling the device (SetMemTable or
// ADD_MEM_REG do that). Rings go in region 0, frame buffers in region 1
// (region 0 if there is only one).
func (f *FrontEnd) NewMemory(sizes ...uint64) {
	f.t.Helper()
	if f.g != nil {
		f.t.Fatal("vhosttest: the front-end already has guest memory")
	}
	var off uint64
	if f.opts != nil {
		off = f.opts.MmapOffset
	}
	m, fds, err := drivertest.NewSharedMemAt(off, sizes...)
	if err != nil {
		f.t.Fatal(err)
	}
	f.g = &guest{mem: m, fds: fds, offset: off, bufRegion: min(1, len(sizes)-1), bufSize: defaultBufSize}
}

// SetMemTable sends the memory table (SET_MEM_TABLE with every region's
// memfd). Sending it again replaces the device's mappings with new ones
// of the same memory, as QEMU does when the guest's memory map changes.
func (f *FrontEnd) SetMemTable() {
	f.t.Helper()
	f.request(ReqSetMemTable, MemTable(f.Regions()...), f.MemFDs()...)
}

// ShareMemory is NewMemory then SetMemTable.
func (f *FrontEnd) ShareMemory(sizes ...uint64) {
	f.t.Helper()
	f.NewMemory(sizes...)
	f.SetMemTable()
}

// Mem is the guest memory as the guest sees it, for tests that place
// buffers themselves. Nil before NewMemory.
func (f *FrontEnd) Mem() *drivertest.Mem {
	if f.g == nil {
		return nil
	}
	return f.g.mem
}

// Regions describes the guest memory regions as the memory table does
// (each at offset Options.MmapOffset of its memfd, 0 by default): those
// of NewMemory, then those AddRegion added, less those RemoveRegion
// removed. (Mem().Regions keeps removed ones, which Mem() no longer
// translates; an added one's Host is nil once removed.)
func (f *FrontEnd) Regions() []Region {
	var rs []Region
	for _, i := range f.g.live() {
		r := f.g.mem.Regions[i]
		rs = append(rs, Region{GuestAddr: r.GuestAddr, Size: r.Size, UserAddr: r.UserAddr, MmapOffset: f.g.offset})
	}
	return rs
}

// MemFDs are the memfds backing the regions, in the order of Regions; the
// front-end owns and closes them.
func (f *FrontEnd) MemFDs() []int {
	var fds []int
	for _, i := range f.g.live() {
		fds = append(fds, f.g.fds[i])
	}
	return fds
}

// TruncateMemory shrinks region i's memfd to nothing under the device's
// mapping, as a hostile front-end can (DPDK's virtio-user does not seal
// its memfds): the device's next touch of that region faults. From then on
// the front-end touches no guest memory itself (its own mapping would
// fault too): frame and ring operations fail with ErrTruncated, until
// Reconnect brings fresh memory.
func (f *FrontEnd) TruncateMemory(i int) {
	f.t.Helper()
	if err := unix.Ftruncate(f.g.fds[f.g.live()[i]], 0); err != nil {
		f.t.Fatal(err)
	}
	f.g.dead = ErrTruncated
}

// freeGuest unmaps the memory and closes the memfds and eventfds.
func (f *FrontEnd) freeGuest() {
	for _, fd := range append(f.kickFDs, f.callFDs...) {
		if fd >= 0 {
			_ = unix.Close(fd)
		}
	}
	f.kickFDs, f.callFDs, f.rings = nil, nil, nil
	if g := f.g; g != nil {
		for _, fd := range g.fds {
			if fd >= 0 {
				_ = unix.Close(fd)
			}
		}
		for _, h := range g.hot {
			_ = unix.Munmap(h.raw)
		}
		g.mem.Close()
		g.dead = ErrFreed
		f.g = nil
	}
}
