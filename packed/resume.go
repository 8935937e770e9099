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
//
// A front-end that served a transmit ring itself while no back-end ran
// leaves one layout more. QEMU drops what a guest sends while the link is
// down (virtio_net_handle_tx_bh, virtqueue_packed_drop_all): from its
// stale position it uses every available chain it finds there, each with
// one used descriptor of length 0 at its own used position (the same one,
// as its base's halves agree), and hands the next back-end its position
// after them. When the stale position lies among the chains the driver had
// pending (it queued frames over it during the outage, and the dead device
// had asked for kicks), the ring reads: the dead device's used slots, then
// chains pending, then the front-end's used run ending exactly at the base
// it sends, then chains pending again. The driver waits at the first
// pending chain, so it gets neither those chains nor the front-end's run
// back until a device uses the chains before the run, and a device that
// starts at the base never does: the guest's transmit queue stops for good
// (CI's restart test, once). Resume drops those chains as the front-end
// did the ones after them (used, length 0; the dead device may have sent
// some, none is sent twice) and the device starts at the base. It reads a
// ring this way only when the ring reads no other way, on a transmit ring
// (QEMU drops nothing on a receive ring), without IN_ORDER, and only when
// the front-end's run ends at the base it sent.

// ErrPositionUnknown: the descriptors do not say where the device stopped
// (a ring that is not laid out as the rules above make it: a driver that
// breaks them, a previous device that left skipped slots unmarked, or one
// that died halfway through publishing a batch that cannot be completed).
var ErrPositionUnknown = errors.New("packed: the descriptors do not say where the device stopped")

// Resumed is what Resume found and did.
type Resumed struct {
	// Base is the state to build the ring from.
	Base uint32
	// Torn says Resume completed a batch the dead device was publishing.
	Torn bool
	// Dropped is how many chains Resume used unsent: those the driver had
	// pending before a run the front-end used itself (see above).
	Dropped int
}

// Resume returns the state to build the ring of cfg from when cfg.Base
// may be stale: cfg.Base itself if its used position is where the
// descriptors say the device stopped (a front-end's own GET_VRING_BASE, or
// a fresh ring), the descriptors' position (avail and used both there)
// when they disagree, and cfg.Base with an error wrapping
// ErrPositionUnknown when they cannot tell. Chains the dead device had
// popped and not used are popped again. A batch the dead device was
// publishing is completed, and chains pending before a front-end's own
// used run are dropped (see above): the writes Resume makes to the ring.
// A base with an index beyond the ring comes back as is, for New to
// refuse.
func Resume(cfg virtq.Config) (Resumed, error) {
	res := Resumed{Base: cfg.Base}
	if cfg.Mem == nil || cfg.Size == 0 || cfg.Size > maxRingSize {
		return res, nil
	}
	if uint16(cfg.Base>>16&0x7fff) >= cfg.Size || uint16(cfg.Base&0x7fff) >= cfg.Size {
		return res, nil
	}
	desc, err := cfg.Mem.TranslateUser(cfg.Desc, uint64(cfg.Size)*descSize, descSize)
	if err != nil {
		return res, nil
	}
	size := uint32(cfg.Size)
	given := circlePos(uint16(cfg.Base>>16), size)
	front := noFront
	if cfg.ReadOnly && !virtq.Has(cfg.Features, virtq.FeatureInOrder) && cfg.Base&0xffff == cfg.Base>>16 {
		front = given
	}
	l, err := locate(snapshotFlags(desc, cfg.Size), cfg.Size, front)
	if err != nil {
		return res, err
	}
	// Everything is checked before anything is written.
	if l.torn >= 0 {
		if err := checkTorn(desc, cfg, uint32(l.torn)); err != nil {
			return res, err
		}
	}
	if l.dropFrom != l.dropTo {
		if res.Dropped, err = dropPending(desc, size, l.dropFrom, l.dropTo); err != nil {
			return res, err
		}
	}
	if l.torn >= 0 {
		completeTorn(desc, cfg, uint32(l.torn))
		res.Torn = true
	}
	if given != l.dev {
		res.Base = stateAt(l.dev, size)
	}
	return res, nil
}

// circlePos is the position on the circle of 2*size positions (see the
// top of this file) of a ring index with its wrap counter in bit 15.
func circlePos(idx uint16, size uint32) uint32 {
	p := uint32(idx & 0x7fff)
	if idx&wrapBit == 0 {
		p += size
	}
	return p
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

// checkTorn says why the batch whose first slot is at circle position pos
// cannot be completed, if it cannot (see the top of this file).
func checkTorn(desc []byte, cfg virtq.Config, pos uint32) error {
	if virtq.Has(cfg.Features, virtq.FeatureInOrder) {
		return fmt.Errorf("%w: a batch cut short under IN_ORDER (position %d)", ErrPositionUnknown, pos)
	}
	off, _ := slotOf(pos, uint32(cfg.Size))
	if uint16(guestmem.LoadAcquire32(desc, off+offIDFlags)>>16)&flagNext != 0 {
		return fmt.Errorf("%w: a batch cut short whose first chain has several slots (position %d)", ErrPositionUnknown, pos)
	}
	return nil
}

// completeTorn writes the used flags of the batch's first slot, at circle
// position pos, that a device killed mid-Push did not write (see the top
// of this file); checkTorn said it can.
func completeTorn(desc []byte, cfg virtq.Config, pos uint32) {
	off, wrap := slotOf(pos, uint32(cfg.Size))
	word := guestmem.LoadAcquire32(desc, off+offIDFlags)
	flags := usedBits(wrap)
	switch {
	case cfg.ReadOnly:
		// The device writes nothing into a transmit chain. A dead
		// device wrote 0 there; a driver's pending chain read as a
		// batch cut short (a front-end's run after it, see above)
		// still holds the driver's length.
		binary.LittleEndian.PutUint32(desc[off+offLen:], 0)
	case binary.LittleEndian.Uint32(desc[off+offLen:]) != 0:
		flags |= flagWrite
	}
	guestmem.StoreRelease32(desc, off+offIDFlags, word&0xffff|uint32(flags)<<16)
}

// slotOf is the byte offset in the descriptor ring of circle position p
// (any multiple of the circle added) and the wrap counter of its lap.
func slotOf(p, size uint32) (off int, wrap bool) {
	p %= 2 * size
	if p >= size {
		return int(p-size) * descSize, false
	}
	return int(p) * descSize, true
}

// noFront is locate's front for a ring the front-end cannot have served.
const noFront = ^uint32(0)

// layout is what locate reads in a ring.
type layout struct {
	dev  uint32 // the device's next position
	torn int    // the first slot of a batch cut short, or -1
	// Chains pending at positions dropFrom up to dropTo (unreduced, so
	// dropFrom <= dropTo), before the front-end's own used run: to drop.
	dropFrom, dropTo uint32
}

// locate returns the device's next position on the circle of 2*size
// positions from the descriptors' flags (see the top of this file) and
// what Resume must complete: the first slot of a batch the dead device
// was publishing, and chains pending before a used run the front-end made
// itself ending at position front (noFront: not a ring it can have
// served).
func locate(flags []uint16, size uint16, front uint32) (layout, error) {
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
		return layout{}, fmt.Errorf("%w: two equal gaps of %d positions", ErrPositionUnknown, best)
	}
	first := bestEnd % m // the oldest of the driver's last size positions
	drv := first + n     // the driver's next position
	// Beyond it only a chain the driver is still writing, never used.
	for p := drv + 1; p < first+m; p++ {
		if at(p) == posUsed {
			return layout{}, fmt.Errorf("%w: a used descriptor ahead of the driver (position %d)", ErrPositionUnknown, p%m)
		}
	}
	// The device's next position: back from the driver's over what it has
	// made available and the device not used.
	dev := drv
	for dev > first && at(dev-1) == posAvail {
		dev--
	}
	torn, err := tornBehind(at, first, dev, drv, m)
	if err == nil {
		return layout{dev: dev % m, torn: torn, dropFrom: dev, dropTo: dev}, nil
	}
	// Used slots ending at the front-end's base, chains pending before
	// them: the front-end's own run (see above), if the ring reads right
	// up to the pending chains.
	if front == noFront || dev%m != front {
		return layout{}, err
	}
	own := dev
	for own > first && at(own-1) == posUsed {
		own--
	}
	from := own
	for from > first && at(from-1) == posAvail {
		from--
	}
	if from == own {
		return layout{}, err
	}
	if torn, err2 := tornBehind(at, first, from, drv, m); err2 == nil {
		return layout{dev: dev % m, torn: torn, dropFrom: from, dropTo: own}, nil
	}
	return layout{}, err
}

// tornBehind checks that the positions from first up to dev are used but
// for at most one available: the first slot of a batch the dead device was
// publishing, whose position it returns (else -1).
func tornBehind(at func(uint32) uint8, first, dev, drv, m uint32) (int, error) {
	torn := -1
	for p := first; p < dev; p++ {
		if at(p) != posAvail {
			continue
		}
		if torn >= 0 {
			return -1, fmt.Errorf("%w: available descriptors behind used ones (positions %d, %d and %d)", ErrPositionUnknown, torn, p%m, (dev-1)%m)
		}
		if p == first && dev == drv {
			// The whole half circle one batch, nothing pending after
			// it: on a ring of 2 the same flags as the driver writing
			// a chain over the whole ring.
			return -1, fmt.Errorf("%w: a batch of the whole ring behind its first slot (position %d)", ErrPositionUnknown, p%m)
		}
		torn = int(p % m)
	}
	return torn, nil
}

// dropPending uses, unsent, the chains the driver made available at
// circle positions from up to to (from <= to, unreduced; see the top of
// this file): each gets a used descriptor of length 0 at its head, with
// the id its last descriptor carries, and the rest of its slots used
// flags, as Push gives them. It returns how many it dropped. The chains
// are checked whole first (every slot available in its lap, the last one
// not NEXT): nothing is written unless they are. The driver does not write
// these slots meanwhile: it has not had them back.
func dropPending(desc []byte, size, from, to uint32) (int, error) {
	m := 2 * size
	slot := func(p uint32) (int, bool) { return slotOf(p, size) }
	word := func(p uint32) uint32 {
		off, _ := slot(p)
		return guestmem.LoadAcquire32(desc, off+offIDFlags)
	}
	for p := from; p < to; p++ {
		_, wrap := slot(p)
		if uint16(word(p)>>16)&(flagAvail|flagUsed) != availBits(wrap) {
			return 0, fmt.Errorf("%w: position %d, among the chains before the front-end's used run, changed", ErrPositionUnknown, p%m)
		}
	}
	if uint16(word(to-1)>>16)&flagNext != 0 {
		return 0, fmt.Errorf("%w: a chain runs from position %d into the front-end's used run", ErrPositionUnknown, (to-1)%m)
	}
	chains := 0
	for head := from; head < to; chains++ {
		last := head
		for last+1 < to && uint16(word(last)>>16)&flagNext != 0 {
			last++
		}
		for p := head + 1; p <= last; p++ {
			off, wrap := slot(p)
			guestmem.StoreRelease32(desc, off+offIDFlags, word(p)&0xffff|uint32(usedBits(wrap))<<16)
		}
		off, wrap := slot(head)
		binary.LittleEndian.PutUint32(desc[off+offLen:], 0)
		guestmem.StoreRelease32(desc, off+offIDFlags, word(last)&0xffff|uint32(usedBits(wrap))<<16)
		head = last + 1
	}
	return chains, nil
}
