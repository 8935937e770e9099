package packed

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/xvswitch/xvswitch/guestmem"
	"github.com/xvswitch/xvswitch/virtq"
)

// Resuming a ring whose back-end died.
//
// A front-end that loses its back-end has no way to know where a packed
// ring's device side stood: QEMU restores a split ring from the used index
// in guest memory, but has nothing like it for a packed ring and hands the
// next back-end the last state it sent or got (docs/reconnect.md). The
// descriptors themselves say it, given two rules of the ring:
//
//   - Every descriptor's AVAIL bit is the wrap counter of whoever wrote it
//     last, driver or device (virtio 1.1, 2.7.1 and 2.7.6: the driver sets
//     the flags of every descriptor of a chain). So each slot tells in
//     which lap it was last written, and the slots' positions, numbered
//     modulo 2*size as in notify.go (slot i is i with wrap counter 1,
//     size+i with 0), fill half the circle: the size positions before the
//     driver's next one.
//   - USED equals AVAIL in what the device wrote and differs in what the
//     driver wrote. The device writes one used descriptor per chain (or per
//     IN_ORDER batch) and skips the rest; Push marks the skipped slots used
//     too, so that every slot this device has consumed reads as used. The
//     half circle is then the device's used slots, then the driver's
//     pending ones: the device's next position is where used stops.
//
// A device killed halfway through a Push leaves one more layout: Push
// writes a batch's used descriptors but the first, then the first one's
// flags last (its release), so a batch cut short reads as one available
// slot (the batch's first, its id and length already written, only its
// flags the driver's) followed by the batch's used slots. The driver has
// seen none of the batch: it polls that first slot. Resume completes it
// as the dead device would have, with the used flags of its lap, and the
// device goes on after the batch. That the id in the slot is the one the
// dead device meant holds when chains are used in the order they were
// popped, as this device does but for buffers lent to or held for the
// zero-copy path (whose torn batch may then return one buffer the dead
// device still held and leave another to leak in the guest, instead of
// the ring stopping for good); and that the length is in place holds on
// amd64, whose stores become visible in program order (the length is
// written before the later descriptors). Under IN_ORDER the first used
// descriptor carries the last id of a run, which the slot does not hold,
// and a first chain of several slots has lost its NEXT flags to Push's
// marking: both stay ErrPositionUnknown.
//
// The driver keeps running while we look: it may have written the
// descriptors of a chain after its next position whose head it has not
// exposed yet, which moves those slots' positions half a circle on. They
// are the only ones beyond the driver's position, so the driver's
// position is still where the largest run of empty positions ends, plus
// size.

// ErrPositionUnknown: the descriptors do not say where the device stopped
// (a ring that is not laid out as the rules above make it: a driver that
// breaks them, a previous device that left skipped slots unmarked, or one
// that died halfway through publishing a batch that cannot be completed).
var ErrPositionUnknown = errors.New("packed: the descriptors do not say where the device stopped")

// Resume returns the state to build the ring of cfg from when cfg.Base
// may be stale: cfg.Base itself if its used position is where the
// descriptors say the device stopped (a front-end's own GET_VRING_BASE, or
// a fresh ring), the descriptors' position (avail and used both there)
// when they disagree, and cfg.Base with an error wrapping
// ErrPositionUnknown when they cannot tell. Chains the dead device had
// popped and not used are popped again. A batch the dead device was
// publishing is completed (see above): the one write Resume makes to the
// ring. A base with an index beyond the ring comes back as is, for New to
// refuse.
func Resume(cfg virtq.Config) (uint32, error) {
	if cfg.Mem == nil || cfg.Size == 0 || cfg.Size > maxRingSize {
		return cfg.Base, nil
	}
	if uint16(cfg.Base>>16&0x7fff) >= cfg.Size || uint16(cfg.Base&0x7fff) >= cfg.Size {
		return cfg.Base, nil
	}
	desc, err := cfg.Mem.TranslateUser(cfg.Desc, uint64(cfg.Size)*descSize, descSize)
	if err != nil {
		return cfg.Base, nil
	}
	pos, torn, err := locate(snapshotFlags(desc, cfg.Size), cfg.Size)
	if err != nil {
		return cfg.Base, err
	}
	size := uint32(cfg.Size)
	if torn >= 0 {
		if err := completeTorn(desc, cfg, uint32(torn)); err != nil {
			return cfg.Base, err
		}
	}
	used := cfg.Base >> 16
	given := used & 0x7fff
	if used&wrapBit == 0 {
		given += size
	}
	if given == pos {
		return cfg.Base, nil
	}
	return stateAt(pos, size), nil
}

// stateAt is the ring state with both indexes at circle position pos.
func stateAt(pos, size uint32) uint32 {
	s := pos
	if pos >= size {
		s = pos - size
	} else {
		s |= wrapBit
	}
	return s | s<<16
}

// snapshotFlags reads every descriptor's flags until two passes agree (a
// few tries: a driver still filling the ring stops when it is full), so
// that what locate sees is one moment of the ring.
func snapshotFlags(desc []byte, size uint16) []uint16 {
	a, b := make([]uint16, size), make([]uint16, size)
	read := func(f []uint16) {
		for i := range f {
			f[i] = uint16(guestmem.LoadAcquire32(desc, i*descSize+offIDFlags) >> 16)
		}
	}
	read(a)
	for try := 0; try < 4; try++ {
		read(b)
		if equal(a, b) {
			break
		}
		a, b = b, a
		time.Sleep(time.Millisecond)
	}
	return b
}

func equal(a, b []uint16) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// What a position of the circle holds.
const (
	posEmpty = iota
	posUsed
	posAvail
)

// completeTorn writes the used flags of the batch's first slot, at circle
// position pos, that a device killed mid-Push did not write (see the top
// of this file), or says why it cannot.
func completeTorn(desc []byte, cfg virtq.Config, pos uint32) error {
	if virtq.Has(cfg.Features, virtq.FeatureInOrder) {
		return fmt.Errorf("%w: a batch cut short under IN_ORDER (position %d)", ErrPositionUnknown, pos)
	}
	n := uint32(cfg.Size)
	slot, wrap := pos, true
	if pos >= n {
		slot, wrap = pos-n, false
	}
	off := int(slot) * descSize
	word := guestmem.LoadAcquire32(desc, off+offIDFlags)
	if uint16(word>>16)&flagNext != 0 {
		return fmt.Errorf("%w: a batch cut short whose first chain has several slots (position %d)", ErrPositionUnknown, pos)
	}
	flags := usedBits(wrap)
	if !cfg.ReadOnly && binary.LittleEndian.Uint32(desc[off+offLen:]) != 0 {
		flags |= flagWrite
	}
	guestmem.StoreRelease32(desc, off+offIDFlags, word&0xffff|uint32(flags)<<16)
	return nil
}

// locate returns the device's next position on the circle of 2*size
// positions from the descriptors' flags (see the top of this file) and,
// when the device died halfway through publishing a batch, the position
// of the batch's first slot, still available (else -1).
func locate(flags []uint16, size uint16) (dev uint32, torn int, err error) {
	n := uint32(size)
	m := 2 * n
	circ := make([]uint8, m)
	for i, f := range flags {
		p := uint32(i)
		if f&flagAvail == 0 {
			p += n
		}
		if (f&flagAvail != 0) == (f&flagUsed != 0) {
			circ[p] = posUsed
		} else {
			circ[p] = posAvail
		}
	}
	at := func(p uint32) uint8 { return circ[p%m] }

	// The largest run of empty positions ends where the driver's last
	// size positions begin. Every slot fills one of its two positions, so
	// there is an occupied one to start from and at least size empty.
	start := uint32(0)
	for circ[start] == posEmpty {
		start++
	}
	best, bestEnd, tied, run := uint32(0), uint32(0), false, uint32(0)
	for k := uint32(1); k <= m; k++ {
		p := start + k
		if at(p) == posEmpty {
			run++
			continue
		}
		switch {
		case run > best:
			best, bestEnd, tied = run, p, false
		case run == best && run > 0:
			tied = true
		}
		run = 0
	}
	if tied {
		return 0, -1, fmt.Errorf("%w: two equal gaps of %d positions", ErrPositionUnknown, best)
	}
	first := bestEnd % m // the oldest of the driver's last size positions
	drv := first + n     // the driver's next position
	// Beyond it only a chain the driver is still writing, never used.
	for p := drv + 1; p < first+m; p++ {
		if at(p) == posUsed {
			return 0, -1, fmt.Errorf("%w: a used descriptor ahead of the driver (position %d)", ErrPositionUnknown, p%m)
		}
	}
	// The device's next position: back from the driver's over what it has
	// made available and the device not used.
	dev = drv
	for dev > first && at(dev-1) == posAvail {
		dev--
	}
	// Behind it, used slots but for at most one: the first of a batch
	// the dead device was publishing.
	torn = -1
	for p := first; p < dev; p++ {
		if at(p) != posAvail {
			continue
		}
		if torn >= 0 {
			return 0, -1, fmt.Errorf("%w: available descriptors behind used ones (positions %d, %d and %d)", ErrPositionUnknown, torn, p%m, (dev-1)%m)
		}
		if p == first && dev == drv {
			// The whole half circle one batch, nothing pending after
			// it: on a ring of 2 the same flags as the driver writing
			// a chain over the whole ring.
			return 0, -1, fmt.Errorf("%w: a batch of the whole ring behind its first slot (position %d)", ErrPositionUnknown, p%m)
		}
		torn = int(p % m)
	}
	return dev % m, torn, nil
}
