package drivertest

import (
	"encoding/binary"
	"fmt"

	"github.com/xvswitch/xvswitch/guestmem"
	"github.com/xvswitch/xvswitch/virtq"
)

// Split ring descriptor and ring flags (virtio 1.x 2.7), as a driver
// writes them.
const (
	SplitFNext     = 1 // VIRTQ_DESC_F_NEXT
	SplitFWrite    = 2 // VIRTQ_DESC_F_WRITE
	SplitFIndirect = 4 // VIRTQ_DESC_F_INDIRECT

	SplitAvailFNoInterrupt = 1 // VRING_AVAIL_F_NO_INTERRUPT
	SplitUsedFNoNotify     = 1 // VRING_USED_F_NO_NOTIFY
)

// SplitBuf is one buffer of a chain, at a guest physical address. Write
// marks it device-writable.
type SplitBuf struct {
	Addr  uint64
	Len   uint32
	Write bool
}

// SplitUsed is a used element as the driver reads it back.
type SplitUsed struct {
	ID  uint16
	Len uint32
}

// SplitDriver plays a virtio driver on a split ring in fake guest memory, as
// Linux's virtio_ring does: a free list of descriptors, chains written into
// the table, heads added to the avail ring and published with a release
// store of avail idx, used entries reaped after an acquire load of used idx
// and their descriptors freed, used_event / NO_INTERRUPT to ask for
// interrupts and avail_event / NO_NOTIFY obeyed for kicks.
//
// Tests may also scribble on the ring directly (Desc, Avail, WriteDesc,
// WriteAvail, PublishIdx) to play a hostile driver.
type SplitDriver struct {
	M    *Mem
	Size uint16
	// Guest physical addresses of the three areas, and their host bytes.
	DescAddr, AvailAddr, UsedAddr uint64
	Desc, Avail, Used             []byte

	region     int      // where indirect tables are allocated
	free       []uint16 // free descriptor indices
	availIdx   uint16   // next avail index to fill
	availFlags uint16
	kickedIdx  uint16 // avail idx at the last NeedKick
	lastUsed   uint16 // next used entry to reap
	start      uint16 // where the indices started (Config's Base)

	chains map[uint16][]uint16 // head -> descriptors it holds
	tables map[uint16]tableBuf // head -> its reusable indirect table
}

type tableBuf struct {
	addr uint64
	n    int
}

// NewSplitDriver lays out a ring of size descriptors in region i of m as
// Linux does (avail right after the table, used aligned to 4 bytes; here
// also on its own page to keep the regions readable) and zeroes it.
func NewSplitDriver(m *Mem, i int, size uint16) *SplitDriver {
	return NewSplitDriverAt(m, i, size, 0, 4)
}

// NewSplitDriverAt is NewSplitDriver with the avail and used indices
// starting at start, as if a previous device had left them there (so tests
// reach the 16-bit wrap quickly), and the used ring aligned to usedAlign.
func NewSplitDriverAt(m *Mem, i int, size uint16, start uint16, usedAlign uint64) *SplitDriver {
	n := uint64(size)
	d := &SplitDriver{M: m, Size: size, region: i,
		chains: make(map[uint16][]uint16), tables: make(map[uint16]tableBuf)}
	d.DescAddr = m.Alloc(i, 16*n+6+2*n, 4096)
	d.AvailAddr = d.DescAddr + 16*n
	d.UsedAddr = m.Alloc(i, 6+8*n, usedAlign)
	d.Desc = m.Bytes(d.DescAddr, 16*n)
	d.Avail = m.Bytes(d.AvailAddr, 6+2*n)
	d.Used = m.Bytes(d.UsedAddr, 6+8*n)
	clear(d.Desc)
	clear(d.Avail)
	clear(d.Used)
	for j := int(size) - 1; j >= 0; j-- {
		d.free = append(d.free, uint16(j))
	}
	d.availIdx, d.kickedIdx, d.lastUsed, d.start = start, start, start, start
	store32(d.Avail, 0, uint32(start)<<16)
	store32(d.Used, 0, uint32(start)<<16)
	return d
}

// Config is the vhost-user view of the ring: front-end virtual addresses,
// and the index the ring started at as Base (a device taking over mid-stream
// uses the previous device's State instead).
func (d *SplitDriver) Config(features uint64) virtq.Config {
	return virtq.Config{Mem: d.M.Memory, Size: d.Size,
		Desc: d.M.User(d.DescAddr), Driver: d.M.User(d.AvailAddr), Device: d.M.User(d.UsedAddr),
		Features: features, Base: uint32(d.start)}
}

// FreeDescs is how many descriptors the driver has free.
func (d *SplitDriver) FreeDescs() int { return len(d.free) }

// Outstanding is how many chains the driver has added and not reaped.
func (d *SplitDriver) Outstanding() int { return len(d.chains) }

// AvailIdx is the avail index the driver will fill next.
func (d *SplitDriver) AvailIdx() uint16 { return d.availIdx }

// AddChain adds a chain of direct descriptors, then, if tail is not empty,
// one descriptor pointing to an indirect table holding tail (the spec lets
// an indirect descriptor end a direct chain). The head goes into the avail
// ring; Publish makes it visible.
func (d *SplitDriver) AddChain(direct, tail []SplitBuf) (uint16, error) {
	need := len(direct)
	if len(tail) > 0 {
		need++
	}
	if need == 0 || need > len(d.free) {
		return 0, fmt.Errorf("drivertest: chain needs %d descriptors, %d free", need, len(d.free))
	}
	descs := make([]uint16, need)
	for k := range descs {
		descs[k] = d.free[len(d.free)-1]
		d.free = d.free[:len(d.free)-1]
	}
	head := descs[0]
	for k, b := range direct {
		flags := uint16(0)
		if b.Write {
			flags |= SplitFWrite
		}
		next := uint16(0)
		if k+1 < need {
			flags |= SplitFNext
			next = descs[k+1]
		}
		d.WriteDesc(descs[k], b.Addr, b.Len, flags, next)
	}
	if len(tail) > 0 {
		t := d.table(head, len(tail))
		for k, b := range tail {
			flags := uint16(0)
			if b.Write {
				flags |= SplitFWrite
			}
			next := uint16(0)
			if k+1 < len(tail) {
				flags |= SplitFNext
				next = uint16(k + 1)
			}
			putDesc(d.M.Bytes(t+16*uint64(k), 16), b.Addr, b.Len, flags, next)
		}
		d.WriteDesc(descs[need-1], t, uint32(16*len(tail)), SplitFIndirect, 0)
	}
	d.chains[head] = descs
	d.WriteAvail(d.availIdx, head)
	d.availIdx++
	return head, nil
}

// table returns the indirect table of head with room for n entries, reusing
// the one it had (the driver model must not leak memory over many laps).
func (d *SplitDriver) table(head uint16, n int) uint64 {
	t, ok := d.tables[head]
	if !ok || t.n < n {
		c := max(n, 16)
		t = tableBuf{addr: d.M.Alloc(d.region, 16*uint64(c), 16), n: c}
		d.tables[head] = t
	}
	return t.addr
}

// Publish makes every chain added so far visible to the device: a release
// store of avail flags|idx (the driver owns both).
func (d *SplitDriver) Publish() {
	store32(d.Avail, 0, uint32(d.availFlags)|uint32(d.availIdx)<<16)
}

// PublishIdx publishes an arbitrary avail idx (hostile tests).
func (d *SplitDriver) PublishIdx(idx uint16) {
	store32(d.Avail, 0, uint32(d.availFlags)|uint32(idx)<<16)
}

// NeedKick reports whether the driver must kick for what it published since
// the last call, as virtqueue_kick_prepare does: with EVENT_IDX when the avail
// index crossed avail_event, otherwise unless the device set NO_NOTIFY.
func (d *SplitDriver) NeedKick(eventIdx bool) bool {
	old, now := d.kickedIdx, d.availIdx
	d.kickedIdx = now
	if eventIdx {
		ev := binary.LittleEndian.Uint16(d.Used[4+8*int(d.Size):])
		return uint16(now-ev-1) < uint16(now-old)
	}
	return d.UsedFlags()&SplitUsedFNoNotify == 0
}

// UsedIdx is the used index the device published.
func (d *SplitDriver) UsedIdx() uint16 { return uint16(load32(d.Used, 0) >> 16) }

// UsedFlags is the used flags word the device wrote.
func (d *SplitDriver) UsedFlags() uint16 { return uint16(load32(d.Used, 0)) }

// AvailEvent is the avail_event the device wrote.
func (d *SplitDriver) AvailEvent() uint16 {
	return binary.LittleEndian.Uint16(d.Used[4+8*int(d.Size):])
}

// SetUsedEvent asks for an interrupt when the device's used index passes
// idx (EVENT_IDX).
func (d *SplitDriver) SetUsedEvent(idx uint16) {
	binary.LittleEndian.PutUint16(d.Avail[4+2*int(d.Size):], idx)
}

// SetNoInterrupt sets or clears VRING_AVAIL_F_NO_INTERRUPT.
func (d *SplitDriver) SetNoInterrupt(on bool) {
	if on {
		d.availFlags |= SplitAvailFNoInterrupt
	} else {
		d.availFlags &^= SplitAvailFNoInterrupt
	}
	d.Publish()
}

// Reap returns the next used element, if the device published one, and
// frees its descriptors. An id that is not an outstanding head is an error
// (the device corrupted the ring).
func (d *SplitDriver) Reap() (SplitUsed, bool, error) {
	if d.UsedIdx() == d.lastUsed {
		return SplitUsed{}, false, nil
	}
	off := 4 + 8*int(d.lastUsed&(d.Size-1))
	e := binary.LittleEndian.Uint64(d.Used[off:])
	u := SplitUsed{ID: uint16(e), Len: uint32(e >> 32)}
	if uint32(e) >= uint32(d.Size) {
		return u, true, fmt.Errorf("drivertest: used id %d out of range", uint32(e))
	}
	descs, ok := d.chains[u.ID]
	if !ok {
		return u, true, fmt.Errorf("drivertest: used id %d is not an outstanding head", u.ID)
	}
	delete(d.chains, u.ID)
	d.free = append(d.free, descs...)
	d.lastUsed++
	return u, true, nil
}

// Forget releases chains the device will never return (a device that lost
// them in flight), as a driver's reset would.
func (d *SplitDriver) Forget(heads []uint16) {
	for _, h := range heads {
		d.free = append(d.free, d.chains[h]...)
		delete(d.chains, h)
	}
}

// WriteDesc writes descriptor i of the table.
func (d *SplitDriver) WriteDesc(i uint16, addr uint64, length uint32, flags, next uint16) {
	putDesc(d.Desc[16*int(i):16*int(i)+16], addr, length, flags, next)
}

// WriteAvail writes head into the avail ring entry of index idx.
func (d *SplitDriver) WriteAvail(idx, head uint16) {
	binary.LittleEndian.PutUint16(d.Avail[4+2*int(idx&(d.Size-1)):], head)
}

func putDesc(b []byte, addr uint64, length uint32, flags, next uint16) {
	binary.LittleEndian.PutUint64(b, addr)
	binary.LittleEndian.PutUint32(b[8:], length)
	binary.LittleEndian.PutUint16(b[12:], flags)
	binary.LittleEndian.PutUint16(b[14:], next)
}

// store32 and load32 are the driver's release store and acquire load of a
// ring's flags|idx word.
func store32(b []byte, off int, v uint32) { guestmem.StoreRelease32(b, off, v) }
func load32(b []byte, off int) uint32     { return guestmem.LoadAcquire32(b, off) }
