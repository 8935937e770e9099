package vhosttest

import (
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/xvswitch/xvswitch/guestmem"
	"github.com/xvswitch/xvswitch/virtq/drivertest"
)

// Memory hot-plug as QEMU does it with CONFIGURE_MEM_SLOTS (a DIMM or
// virtio-mem plugged, a memory backend added or removed): one region at a
// time, with ADD_MEM_REG carrying the new region's memfd and REM_MEM_REG
// naming a region by its addresses and size.

// hotRegion is a region AddRegion made: its mapping and a bump allocator.
type hotRegion struct {
	raw  []byte // the front-end's mapping, from the page below MmapOffset
	end  uint64 // guest address past the region
	next uint64 // next free guest address
}

func (h *hotRegion) alloc(size, align uint64) uint64 {
	a := (h.next + align - 1) &^ (align - 1)
	if a+size > h.end {
		panic(fmt.Sprintf("vhosttest: added region at %#x full", h.end))
	}
	h.next = a + size
	return a
}

// AddRegion creates a region of size bytes in a memfd of its own (at
// Options.MmapOffset in it, like the others), at a guest address 1 GiB
// past the end of the highest region, tells the device with ADD_MEM_REG
// (acknowledged once REPLY_ACK is negotiated) and returns its index in
// Regions. Send and PostRx keep taking buffers where they did until
// UseBufferRegion moves them.
func (f *FrontEnd) AddRegion(size uint64) int {
	f.t.Helper()
	g := f.guestAlive()
	var top uint64
	for _, r := range g.mem.Regions {
		top = max(top, r.GuestAddr+r.Size)
	}
	gpa := (top+1<<30-1)&^(1<<30-1) + 1<<30
	fd, err := unix.MemfdCreate(fmt.Sprintf("drivertest-guest-hot-%#x", gpa), unix.MFD_CLOEXEC)
	if err != nil {
		f.t.Fatal(err)
	}
	pg := uint64(unix.Getpagesize())
	start := g.offset &^ (pg - 1)
	if err := unix.Ftruncate(fd, int64(g.offset+size)); err != nil {
		_ = unix.Close(fd)
		f.t.Fatal(err)
	}
	raw, err := unix.Mmap(fd, int64(start), int(g.offset-start+size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		_ = unix.Close(fd)
		f.t.Fatal(err)
	}
	g.mem.Regions = append(g.mem.Regions, guestmem.Region{GuestAddr: gpa, Size: size, UserAddr: gpa + drivertest.UserOffset, Host: raw[g.offset-start:]})
	g.fds = append(g.fds, fd)
	if g.hot == nil {
		g.hot = map[uint64]*hotRegion{}
	}
	g.hot[gpa] = &hotRegion{raw: raw, end: gpa + size, next: gpa}
	if err := g.translate(); err != nil {
		f.t.Fatal(err)
	}
	i := len(g.live()) - 1
	f.request(ReqAddMemReg, MemReg(f.Regions()[i]), fd)
	return i
}

// RemoveRegion tells the device region i (of Regions) is gone
// (REM_MEM_REG, acknowledged once REPLY_ACK is negotiated), then forgets it
// as QEMU does once the back-end let go: the front-end no longer
// translates it, closes its memfd and unmaps it (an added one; the others
// stay mapped until Close, as drivertest maps them). Buffers the pool holds
// in it are not used again. A test removes a region only once the device
// has given back every buffer in it (Receive reads them), and not region
// 0, where the rings are.
func (f *FrontEnd) RemoveRegion(i int) {
	f.t.Helper()
	g := f.guestAlive()
	live := g.live()
	if i <= 0 || i >= len(live) {
		f.t.Fatalf("vhosttest: RemoveRegion(%d) of %d regions (region 0 holds the rings)", i, len(live))
	}
	f.request(ReqRemMemReg, MemReg(f.Regions()[i]))
	k := live[i]
	if g.gone == nil {
		g.gone = map[int]bool{}
	}
	g.gone[k] = true
	if k == g.bufRegion {
		g.bufRegion, g.free = 0, nil
	}
	if err := g.translate(); err != nil {
		f.t.Fatal(err)
	}
	_ = unix.Close(g.fds[k])
	g.fds[k] = -1
	r := &g.mem.Regions[k]
	if h := g.hot[r.GuestAddr]; h != nil {
		r.Host = nil // unmapped: nothing may touch it
		_ = unix.Munmap(h.raw)
		delete(g.hot, r.GuestAddr)
	}
}

// UseBufferRegion makes Send and PostRx take their buffers from region i
// (of Regions) from now on; buffers of the old region that come back are
// not used again.
func (f *FrontEnd) UseBufferRegion(i int) {
	f.t.Helper()
	g := f.guestAlive()
	live := g.live()
	if i < 0 || i >= len(live) {
		f.t.Fatalf("vhosttest: UseBufferRegion(%d) of %d regions", i, len(live))
	}
	g.bufRegion, g.free = live[i], nil
}

// translate rebuilds what Mem() translates through from the regions
// still there.
func (g *guest) translate() error {
	var rs []guestmem.Region
	for _, i := range g.live() {
		rs = append(rs, g.mem.Regions[i])
	}
	m, err := guestmem.New(rs)
	if err != nil {
		return err
	}
	g.mem.Memory = m
	return nil
}
