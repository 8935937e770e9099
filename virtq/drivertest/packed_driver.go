package drivertest

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/xvswitch/xvswitch/guestmem"
	"github.com/xvswitch/xvswitch/virtq"
)

// Packed ring layout and flags, as a driver writes them (virtio 1.1, 2.7).
const (
	PackedNext     = 1 << 0
	PackedWrite    = 1 << 1
	PackedIndirect = 1 << 2
	PackedAvail    = 1 << 7
	PackedUsed     = 1 << 15

	PackedEventEnable  = 0
	PackedEventDisable = 1
	PackedEventDesc    = 2

	// PackedInitialBase is the SET_VRING_BASE value of a fresh packed
	// ring: indexes 0, both wrap counters 1.
	PackedInitialBase uint32 = 1<<15 | 1<<31

	packedDescSize = 16
)

// ErrPackedFull means the driver has no free descriptors or ids for a chain.
var ErrPackedFull = errors.New("drivertest: packed ring has no room for the chain")

// PackedBuf is one buffer of a chain the driver makes available.
type PackedBuf struct {
	Addr  uint64 // guest physical
	Len   uint32
	Write bool // device-writable
}

// PackedDesc is a raw descriptor for hostile tests: AddRaw writes it as is,
// adding only the AVAIL/USED bits of the current wrap counter.
type PackedDesc struct {
	Addr  uint64
	Len   uint32
	ID    uint16
	Flags uint16
}

// PackedCompletion is a used buffer the driver reaped.
type PackedCompletion struct {
	ID    uint16
	Len   uint32 // bytes the device wrote (for a skipped in-order buffer: all its writable bytes)
	Slots uint16 // ring slots the chain took
}

type packedInFlight struct {
	inFlight bool
	slots    uint16
	writeLen uint32
}

type packedTable struct {
	addr uint64
	n    int
}

// PackedDriver builds a packed virtqueue in Mem as a guest driver does: it
// writes chains into the descriptor ring with its wrap counter, exposes the
// head of each chain last (with a release store), allocates buffer ids,
// reaps used descriptors (skipping by chain size, expanding IN_ORDER
// batches) and checks that the device behaves, and sets driver event
// suppression.
type PackedDriver struct {
	M    *Mem
	Size uint16
	// Guest physical addresses of the descriptor ring and of the driver
	// and device event suppression areas.
	DescAddr, DriverAddr, DeviceAddr uint64
	// InOrder makes Reap expect IN_ORDER batches (one used descriptor for
	// a run of buffers, carrying the last id).
	InOrder bool
	// ScrambleIDs writes a wrong id into every descriptor of a chain but
	// the last, where the spec puts the buffer id.
	ScrambleIDs bool
	// UsedDescs counts the used descriptors Reap has read.
	UsedDescs int

	desc, drv, dev []byte
	region         int

	nextAvail uint16
	availWrap bool
	nextUsed  uint16
	usedWrap  bool
	freeSlots int

	bufs    []packedInFlight // by id
	freeIDs []uint16         // stack
	order   []uint16         // ids in the order made available (IN_ORDER)
	ordHead int
	ordLen  int
	live    []uint16      // ids in flight, in no order
	livePos []int         // index of each id in live
	tables  []packedTable // indirect table per id, reused
}

// NewPackedDriver allocates a packed ring of size descriptors in region
// region of m, zeroed, with both wrap counters at 1.
func NewPackedDriver(m *Mem, region int, size uint16) *PackedDriver {
	d := &PackedDriver{M: m, Size: size, region: region, availWrap: true, usedWrap: true, freeSlots: int(size)}
	d.DescAddr = m.Alloc(region, uint64(size)*packedDescSize, packedDescSize)
	d.DriverAddr = m.Alloc(region, 4, 4)
	d.DeviceAddr = m.Alloc(region, 4, 4)
	d.desc = m.Bytes(d.DescAddr, uint64(size)*packedDescSize)
	d.drv = m.Bytes(d.DriverAddr, 4)
	d.dev = m.Bytes(d.DeviceAddr, 4)
	clear(d.desc)
	clear(d.drv)
	clear(d.dev)
	d.bufs = make([]packedInFlight, size)
	d.tables = make([]packedTable, size)
	d.order = make([]uint16, size)
	d.live = make([]uint16, 0, size)
	d.livePos = make([]int, size)
	d.freeIDs = make([]uint16, 0, size)
	for i := int(size) - 1; i >= 0; i-- {
		d.freeIDs = append(d.freeIDs, uint16(i))
	}
	return d
}

// Config returns the device's view of this ring for a fresh start.
func (d *PackedDriver) Config(features uint64) virtq.Config {
	return virtq.Config{
		Mem:      d.M.Memory,
		Size:     d.Size,
		Desc:     d.M.User(d.DescAddr),
		Driver:   d.M.User(d.DriverAddr),
		Device:   d.M.User(d.DeviceAddr),
		Features: features,
		Base:     PackedInitialBase,
	}
}

// PeekID is the id the next Add or AddIndirect will use, so that a test
// can place buffers by id before adding them.
func (d *PackedDriver) PeekID() (uint16, bool) {
	if len(d.freeIDs) == 0 {
		return 0, false
	}
	return d.freeIDs[len(d.freeIDs)-1], true
}

// FreeSlots is how many descriptors the driver may still make available.
func (d *PackedDriver) FreeSlots() int { return d.freeSlots }

// InFlight is how many buffers the driver has made available and not reaped.
func (d *PackedDriver) InFlight() int { return int(d.Size) - len(d.freeIDs) }

// NextAvail is the slot the next chain starts at, and the driver wrap counter.
func (d *PackedDriver) NextAvail() (uint16, bool) { return d.nextAvail, d.availWrap }

// NextUsed is the slot the driver expects the next used descriptor at, and
// the wrap counter it must carry.
func (d *PackedDriver) NextUsed() (uint16, bool) { return d.nextUsed, d.usedWrap }

// PackedOffWrap encodes a ring position as event suppression's off_wrap.
func PackedOffWrap(idx uint16, wrap bool) uint16 {
	if wrap {
		return idx | 1<<15
	}
	return idx
}

// Add makes a chain of direct descriptors available and returns its id.
func (d *PackedDriver) Add(bufs []PackedBuf) (uint16, error) {
	if len(bufs) == 0 || len(bufs) > d.freeSlots || len(d.freeIDs) == 0 {
		return 0, ErrPackedFull
	}
	id := d.allocID(uint16(len(bufs)), bufs)
	head, headFlags, headID := d.nextAvail, uint16(0), id
	for i, b := range bufs {
		flags := d.availBits()
		if b.Write {
			flags |= PackedWrite
		}
		descID := id
		if i+1 < len(bufs) {
			flags |= PackedNext
			if d.ScrambleIDs {
				descID = ^id
			}
		}
		if i == 0 {
			headFlags, headID = flags, descID
			d.putDesc(d.nextAvail, b.Addr, b.Len, descID, 0, false)
		} else {
			d.putDesc(d.nextAvail, b.Addr, b.Len, descID, flags, true)
		}
		d.step()
	}
	d.publish(head, headID, headFlags)
	return id, nil
}

// AddBurst makes each buffer of bufs available as a chain of its own (one
// descriptor each), as a driver filling a queue in one go does: every
// descriptor is written in full, and the first one's flags last, with a
// release store, so that the device sees the whole batch when it sees the
// first. It returns how many it added (fewer when ids or slots run out).
func (d *PackedDriver) AddBurst(bufs []PackedBuf) int {
	n := min(len(bufs), d.freeSlots, len(d.freeIDs))
	if n == 0 {
		return 0
	}
	// Lean on purpose: benchmarks run this per frame.
	head, headWord := d.nextAvail, uint32(0)
	for i := 0; i < n; i++ {
		b := &bufs[i]
		id := d.freeIDs[len(d.freeIDs)-1]
		d.freeIDs = d.freeIDs[:len(d.freeIDs)-1]
		var wl uint32
		flags := d.availBits()
		if b.Write {
			wl, flags = b.Len, flags|PackedWrite
		}
		d.bufs[id] = packedInFlight{inFlight: true, slots: 1, writeLen: wl}
		if d.InOrder {
			d.order[(d.ordHead+d.ordLen)%len(d.order)] = id
			d.ordLen++
		}
		d.livePos[id] = len(d.live)
		d.live = append(d.live, id)
		e := d.desc[int(d.nextAvail)*packedDescSize : int(d.nextAvail)*packedDescSize+packedDescSize]
		binary.LittleEndian.PutUint64(e[0:], b.Addr)
		binary.LittleEndian.PutUint32(e[8:], b.Len)
		word := uint32(id) | uint32(flags)<<16
		if i == 0 {
			headWord = word
			binary.LittleEndian.PutUint16(e[12:], id)
		} else {
			binary.LittleEndian.PutUint32(e[12:], word)
		}
		d.step()
	}
	d.freeSlots -= n
	guestmem.StoreRelease32(d.desc, int(head)*packedDescSize+12, headWord)
	return n
}

// AddIndirect makes a chain available as one indirect descriptor whose
// table lists bufs, and returns its id.
func (d *PackedDriver) AddIndirect(bufs []PackedBuf) (uint16, error) {
	if len(bufs) == 0 || d.freeSlots < 1 || len(d.freeIDs) == 0 {
		return 0, ErrPackedFull
	}
	id := d.allocID(1, bufs)
	t := &d.tables[id]
	if t.n < len(bufs) {
		t.n = max(len(bufs), 8)
		t.addr = d.M.Alloc(d.region, uint64(t.n)*packedDescSize, packedDescSize)
	}
	tb := d.M.Bytes(t.addr, uint64(len(bufs))*packedDescSize)
	for i, b := range bufs {
		e := tb[i*packedDescSize:]
		binary.LittleEndian.PutUint64(e[0:], b.Addr)
		binary.LittleEndian.PutUint32(e[8:], b.Len)
		var flags uint16
		if b.Write {
			flags = PackedWrite
		}
		binary.LittleEndian.PutUint16(e[12:], 0)
		binary.LittleEndian.PutUint16(e[14:], flags)
	}
	head, flags := d.nextAvail, d.availBits()|PackedIndirect
	d.putDesc(head, t.addr, uint32(len(bufs))*packedDescSize, id, 0, false)
	d.step()
	d.publish(head, id, flags)
	return id, nil
}

// AddRaw writes descs at the next slots as one chain, exactly as given but
// with the AVAIL/USED bits of each slot's wrap counter, and exposes the
// first one last. It keeps no record of ids: for hostile tests.
func (d *PackedDriver) AddRaw(descs []PackedDesc) {
	head, headFlags, headID := d.nextAvail, uint16(0), uint16(0)
	for i, x := range descs {
		flags := x.Flags&^(PackedAvail|PackedUsed) | d.availBits()
		if i == 0 {
			headFlags, headID = flags, x.ID
			d.putDesc(d.nextAvail, x.Addr, x.Len, x.ID, 0, false)
		} else {
			d.putDesc(d.nextAvail, x.Addr, x.Len, x.ID, flags, true)
		}
		d.step()
	}
	d.freeSlots -= len(descs)
	if len(descs) > 0 {
		d.publish(head, headID, headFlags)
	}
}

// WriteTable stores raw descriptors as an indirect table and returns its
// guest address: for hostile tests.
func (d *PackedDriver) WriteTable(descs []PackedDesc) uint64 {
	a := d.M.Alloc(d.region, uint64(max(len(descs), 1))*packedDescSize, packedDescSize)
	tb := d.M.Bytes(a, uint64(max(len(descs), 1))*packedDescSize)
	for i, x := range descs {
		e := tb[i*packedDescSize:]
		binary.LittleEndian.PutUint64(e[0:], x.Addr)
		binary.LittleEndian.PutUint32(e[8:], x.Len)
		binary.LittleEndian.PutUint16(e[12:], x.ID)
		binary.LittleEndian.PutUint16(e[14:], x.Flags)
	}
	return a
}

// Reap reads every used descriptor the device has published, appends the
// buffers they complete to dst, frees their ids and slots, and returns dst.
// It checks what a driver relies on: an id in flight, a length within the buffer's writable bytes, WRITE set
// exactly when the length is not zero, and with IN_ORDER that an id
// completes the oldest buffers first.
func (d *PackedDriver) Reap(dst []PackedCompletion) ([]PackedCompletion, error) {
	for {
		off := int(d.nextUsed) * packedDescSize
		w := guestmem.LoadAcquire32(d.desc, off+12)
		flags := uint16(w >> 16)
		// Used means AVAIL == USED == our wrap counter (as Linux checks):
		// USED alone could be a stale available descriptor of the other
		// lap, in a slot the device skipped over.
		if (flags&PackedUsed != 0) != d.usedWrap || (flags&PackedAvail != 0) != d.usedWrap {
			return dst, nil
		}
		id, ln := uint16(w), binary.LittleEndian.Uint32(d.desc[off+8:])
		if id >= d.Size || !d.bufs[id].inFlight {
			return dst, fmt.Errorf("slot %d: used id %d is not in flight", d.nextUsed, id)
		}
		if ln > d.bufs[id].writeLen {
			return dst, fmt.Errorf("slot %d: id %d used length %d exceeds its %d writable bytes", d.nextUsed, id, ln, d.bufs[id].writeLen)
		}
		if (flags&PackedWrite != 0) != (ln != 0) {
			return dst, fmt.Errorf("slot %d: id %d length %d with flags %#x", d.nextUsed, id, ln, flags)
		}
		d.UsedDescs++
		if !d.InOrder {
			dst = append(dst, d.complete(id, ln))
			continue
		}
		for {
			if d.ordLen == 0 {
				return dst, fmt.Errorf("in-order: id %d not found among the buffers in flight", id)
			}
			old := d.order[d.ordHead]
			d.ordHead = (d.ordHead + 1) % len(d.order)
			d.ordLen--
			if old == id {
				dst = append(dst, d.complete(id, ln))
				break
			}
			// Skipped buffers were used completely.
			dst = append(dst, d.complete(old, d.bufs[old].writeLen))
		}
	}
}

// Recycle takes every buffer in flight back as if reaped, without reading
// the used descriptors: for benchmarks, where the device is known to have
// used them all and the cost of checking them is not what is measured
// (split's benchmark does not reap either). The driver's next used slot
// moves past them.
func (d *PackedDriver) Recycle() {
	slots := uint32(0)
	for _, id := range d.live {
		b := &d.bufs[id]
		b.inFlight = false
		d.freeIDs = append(d.freeIDs, id)
		slots += uint32(b.slots)
	}
	d.live = d.live[:0]
	d.ordLen = 0
	d.freeSlots += int(slots)
	// All slots in flight are now behind the used index.
	n := uint32(d.nextUsed) + slots%uint32(d.Size)
	if slots >= uint32(d.Size) || n >= uint32(d.Size) {
		d.usedWrap = !d.usedWrap
	}
	if n >= uint32(d.Size) {
		n -= uint32(d.Size)
	}
	d.nextUsed = uint16(n)
}

// SetDriverEvent writes the driver event suppression area: flags is one of
// PackedEventEnable, PackedEventDisable, PackedEventDesc; offWrap matters
// for PackedEventDesc (see PackedOffWrap).
func (d *PackedDriver) SetDriverEvent(flags, offWrap uint16) {
	guestmem.StoreRelease32(d.drv, 0, uint32(offWrap)|uint32(flags)<<16)
}

// DeviceEvent reads the device event suppression area.
func (d *PackedDriver) DeviceEvent() (flags, offWrap uint16) {
	w := guestmem.LoadAcquire32(d.dev, 0)
	return uint16(w >> 16), uint16(w)
}

// Desc returns the raw descriptor ring, for tests that corrupt it.
func (d *PackedDriver) Desc() []byte { return d.desc }

func (d *PackedDriver) complete(id uint16, ln uint32) PackedCompletion {
	b := &d.bufs[id]
	c := PackedCompletion{ID: id, Len: ln, Slots: b.slots}
	b.inFlight = false
	d.freeIDs = append(d.freeIDs, id)
	d.freeSlots += int(b.slots)
	last := d.live[len(d.live)-1]
	d.live[d.livePos[id]] = last
	d.livePos[last] = d.livePos[id]
	d.live = d.live[:len(d.live)-1]
	n := uint32(d.nextUsed) + uint32(b.slots)
	if n >= uint32(d.Size) {
		n -= uint32(d.Size)
		d.usedWrap = !d.usedWrap
	}
	d.nextUsed = uint16(n)
	return c
}

func (d *PackedDriver) allocID(slots uint16, bufs []PackedBuf) uint16 {
	id := d.freeIDs[len(d.freeIDs)-1]
	d.freeIDs = d.freeIDs[:len(d.freeIDs)-1]
	var wl uint32
	for _, b := range bufs {
		if b.Write {
			wl += b.Len
		}
	}
	d.bufs[id] = packedInFlight{inFlight: true, slots: slots, writeLen: wl}
	d.freeSlots -= int(slots)
	if d.InOrder {
		d.order[(d.ordHead+d.ordLen)%len(d.order)] = id
		d.ordLen++
	}
	d.livePos[id] = len(d.live)
	d.live = append(d.live, id)
	return id
}

// availBits is the AVAIL/USED bits of a descriptor written at d.nextAvail.
func (d *PackedDriver) availBits() uint16 {
	if d.availWrap {
		return PackedAvail
	}
	return PackedUsed
}

func (d *PackedDriver) step() {
	if d.nextAvail++; d.nextAvail == d.Size {
		d.nextAvail = 0
		d.availWrap = !d.availWrap
	}
}

// putDesc writes a descriptor's addr, len and (unless deferred) id|flags.
func (d *PackedDriver) putDesc(slot uint16, addr uint64, ln uint32, id, flags uint16, withFlags bool) {
	e := d.desc[int(slot)*packedDescSize : int(slot)*packedDescSize+packedDescSize]
	binary.LittleEndian.PutUint64(e[0:], addr)
	binary.LittleEndian.PutUint32(e[8:], ln)
	if withFlags {
		binary.LittleEndian.PutUint32(e[12:], uint32(id)|uint32(flags)<<16)
	} else {
		binary.LittleEndian.PutUint16(e[12:], id)
	}
}

// publish exposes a chain by storing its head's id|flags with release order.
func (d *PackedDriver) publish(head, id, flags uint16) {
	guestmem.StoreRelease32(d.desc, int(head)*packedDescSize+12, uint32(id)|uint32(flags)<<16)
}
