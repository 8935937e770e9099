package vswitch

import (
	"encoding/binary"
	"errors"
	"net"
	"sync"
	"sync/atomic"
)

// FDB is the learning bridge's forwarding database: (VLAN, MAC) -> port.
//
// Every frame reads it (destination lookup) and every frame's source MAC is
// checked against it, from several workers at once; it changes rarely (a
// new MAC, a MAC that moved, aging). So reads are lock-free loads in an
// open-addressing table, and writers (learning a new or moved MAC, aging,
// static entries) serialise on a mutex that the per-frame path takes only
// when something actually changes.
//
// A slot is two words, because a key (48 bits of MAC, 12 of VLAN) and a
// port index do not fit in one: a key word and a value word (the port),
// side by side with the time the key was last seen, so that a lookup and
// a learn of a known MAC touch one cache line. Both words carry the
// slot's generation, bumped each time the slot takes a key, and a reader
// uses a port only if its generation is the key's: a port written for
// another key (the slot was reused, or rebuilt, between the reader's two
// loads) is never taken for this one. The reader then sees a miss and
// floods that frame, which is harmless. (Only a reader stalled between
// its two loads while its slot takes 15 other keys could pair a key with
// another's port.)
type FDB struct {
	slots []fdbSlot // len is a power of two
	mask  uint64

	mu    sync.Mutex // writers only
	used  int        // live entries + tombstones, under mu
	live  atomic.Int64
	full  atomic.Uint64 // learn attempts refused because the table is full
	clock *Clock
	// limits is each port's share of the table, by port index (SetLimit,
	// fdblimit.go); nil where a port has no limit.
	limits atomic.Pointer[[]*portMACs]
	// changed, if set, is called (under mu) when a MAC is added or moves,
	// so the control plane can update the NICs' MAC steering at once
	// instead of at its next tick. It must not block.
	changed func()
}

// fdbSlot is one entry of the table.
type fdbSlot struct {
	key  atomic.Uint64 // see the key-word encoding below
	val  atomic.Uint64 // port+1, static bit and generation of key
	seen atomic.Uint32 // last time (Clock seconds) the source MAC was seen
}

// Key word: bits 0-47 the MAC, bits 48-59 the VLAN, bits 60-63 the slot's
// generation (1-15; never 0 in a live entry). 0 is an empty slot, and
// keyMask (generation 0) a tombstone: a deleted entry that keeps probe
// chains intact. A tombstone's key bits, broadcast in VLAN 4095, are never
// looked up or learned. A key (FDBKey) is the low 60 bits.
//
// Value word: bits 0-14 the port index + 1, bit 15 static (configured,
// never aged), bits 60-63 the generation of the key it belongs to (where
// the key word has it, so one XOR compares them).
const (
	entryEmpty     = 0
	keyMask        = 1<<60 - 1
	entryTombstone = keyMask
	genShift       = 60
	valStatic      = 1 << 15
	valGenShift    = genShift
	portMask       = 0x7fff
	macMask        = 1<<48 - 1
	vlanShift      = 48
	// MaxPorts bounds port indexes an FDB entry can hold.
	MaxPorts = portMask - 1
)

// FDBKey is the key of MAC key mac (MACKey) in VLAN vid (0-4095). VLAN 0
// is the untagged VLAN of ports without VLAN settings: there, a key is the
// MAC key itself.
func FDBKey(vid uint16, mac uint64) uint64 { return mac | uint64(vid&0xfff)<<vlanShift }

// valPort is the port index a value word holds.
func valPort(v uint64) int { return int(v&portMask) - 1 }

// live is whether key word e holds an entry (not empty, not a tombstone).
func liveKey(e uint64) bool { return e>>genShift != 0 }

// ErrFDBFull means the table has no room for another MAC.
var ErrFDBFull = errors.New("vswitch: fdb table full")

// NoPort is what Lookup returns for an unknown MAC.
const NoPort = -1

// Clock is a coarse clock (seconds) that the control goroutine advances, so
// that the per-frame path reads a word instead of calling time.Now.
type Clock struct{ now atomic.Uint32 }

// Now returns the clock's seconds.
func (c *Clock) Now() uint32 { return c.now.Load() }

// Set sets the clock's seconds.
func (c *Clock) Set(s uint32) { c.now.Store(s) }

// Advance sets the clock's seconds to s unless it is ahead already: the
// housekeeper and waking workers both advance it, and it never goes back.
func (c *Clock) Advance(s uint32) {
	for {
		old := c.now.Load()
		if s <= old || c.now.CompareAndSwap(old, s) {
			return
		}
	}
}

// NewFDB returns a table for at least capacity MACs, at most 50% full so
// probe chains stay short.
func NewFDB(capacity int, clock *Clock) *FDB {
	n := 16
	for n < 2*capacity {
		n <<= 1
	}
	return &FDB{
		slots: make([]fdbSlot, n),
		mask:  uint64(n - 1),
		clock: clock,
	}
}

// MACKey packs a 6-byte MAC into the low 48 bits of a uint64.
func MACKey(mac []byte) uint64 {
	_ = mac[5]
	return uint64(binary.BigEndian.Uint16(mac[0:2]))<<32 | uint64(binary.BigEndian.Uint32(mac[2:6]))
}

// headerKeys returns the MAC keys (MACKey) of an Ethernet header's source
// and destination, h being at least the header's 14 bytes: one 8-byte
// load each, the MAC in its top 6 bytes, instead of MACKey's two loads.
func headerKeys(h []byte) (src, dst uint64) {
	_ = h[13]
	return binary.BigEndian.Uint64(h[6:14]) >> 16, binary.BigEndian.Uint64(h[0:8]) >> 16
}

// MACString formats a MAC key.
func MACString(k uint64) string {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], k)
	return net.HardwareAddr(b[2:8]).String()
}

func hashMAC(k uint64) uint64 {
	// The low bytes of a MAC vary most (vendors own the top three), but a
	// multiply-shift mixes all of them cheaply, the VLAN's bits too.
	return (k * 0x9E3779B97F4A7C15) >> 20
}

// slot finds k: it returns the slot index holding k, or -1.
func (f *FDB) slot(k uint64) int {
	s, _ := f.find(k)
	return s
}

// find returns the slot whose key word holds k and that word, or -1 and
// entryEmpty. The probe ends at an empty slot, and there always is one:
// put keeps live entries and tombstones to half the table. (Key 0, the
// zero MAC in VLAN 0, matches an empty slot; value then finds no port
// there. It is never learned or pinned.)
func (f *FDB) find(k uint64) (int, uint64) {
	for i := hashMAC(k) & f.mask; ; i = (i + 1) & f.mask {
		e := f.slots[i].key.Load()
		if e&keyMask == k {
			return int(i), e
		}
		if e == entryEmpty {
			return -1, entryEmpty
		}
	}
}

// value is the value word of slot s, whose key word find read as e, and
// whether it is e's: a value of another generation means the slot was
// reused or rebuilt between the two loads, a miss (the frame floods).
// fill writes the value before the key, so a key and a value of one
// generation belong together.
func (f *FDB) value(s int, e uint64) (uint64, bool) {
	if s < 0 {
		return 0, false
	}
	v := f.slots[s].val.Load()
	return v, (v^e)>>genShift == 0
}

// Lookup returns the port key k (FDBKey) was learned on, or NoPort.
func (f *FDB) Lookup(k uint64) int {
	if v, ok := f.value(f.find(k)); ok {
		return valPort(v)
	}
	return NoPort
}

// Learn records that source key k (FDBKey) was seen on port. The common
// case (k known on that port, seen this second already) is four loads:
// the key, its value, the clock and its timestamp. It does not learn
// group addresses or the zero MAC, nor a new MAC on a port that holds its
// limit of them (that is counted, LearnRefused).
func (f *FDB) Learn(k uint64, port int) {
	if k&(1<<40) != 0 || k&macMask == 0 { // multicast/broadcast bit of the first octet, or 00:00:..
		return
	}
	s, e := f.find(k)
	f.learnFound(k, port, s, e)
}

// learnFound is Learn once find(k) returned slot s and its key word e:
// the forwarding path calls find itself, where the compiler inlines it.
func (f *FDB) learnFound(k uint64, port, s int, e uint64) {
	if v, ok := f.value(s, e); ok && (valPort(v) == port || v&valStatic != 0) {
		if now := f.clock.Now(); f.slots[s].seen.Load() != now {
			f.slots[s].seen.Store(now)
		}
		return
	}
	f.learnNew(k, port)
}

// learnNew is Learn for a MAC that is new or moved: the slow path, kept
// out of Learn so that the common case stays small.
func (f *FDB) learnNew(k uint64, port int) {
	if l := f.limit(port); l.full() {
		l.refused.Add(1)
		return
	}
	_ = f.put(k, port, false)
}

// AddStatic pins key k (FDBKey) to port; it never ages out and learning
// never moves it.
func (f *FDB) AddStatic(k uint64, port int) error { return f.put(k, port, true) }

// fill makes slot i hold k -> v with a new generation: the value word
// first, so that a reader that sees the key finds its value.
func (f *FDB) fill(i uint64, k uint64, v uint64) {
	g := f.slots[i].val.Load()>>valGenShift%15 + 1
	f.slots[i].val.Store(v | g<<valGenShift)
	f.slots[i].key.Store(k | uint64(g)<<genShift)
}

func (f *FDB) put(k uint64, port int, static bool) error {
	v := uint64(port + 1)
	if static {
		v |= valStatic
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	// A learned entry counts against its port's limit: a new one, or one
	// moving in from another port, must fit (checked again here because
	// two workers may poll queues of one port).
	l := f.limit(port)
	if s, e := f.find(k); s >= 0 {
		old, _ := f.value(s, e) // writers hold mu: nothing changes under this one
		if e == entryEmpty {
			// Only k 0, matching an empty slot (writers hold mu, so
			// nothing changes under this one): never an entry.
			return nil
		}
		if old&valStatic != 0 && !static {
			return nil
		}
		if !static && valPort(old) != port && l.full() {
			l.refused.Add(1)
			return ErrPortMACLimit
		}
		if old&valStatic == 0 {
			f.countLearned(valPort(old), -1)
		}
		if !static {
			f.countLearned(port, 1)
		}
		// Same key, same generation: only the value changes.
		f.slots[s].val.Store(v | old&^(1<<valGenShift-1))
		f.slots[s].seen.Store(f.clock.Now())
		if valPort(old) != port && f.changed != nil {
			f.changed()
		}
		return nil
	}
	if !static && l.full() {
		l.refused.Add(1)
		return ErrPortMACLimit
	}
	if f.used+1 > len(f.slots)/2 {
		f.full.Add(1)
		return ErrFDBFull
	}
	i := hashMAC(k) & f.mask
	for {
		cur := f.slots[i].key.Load()
		if cur == entryEmpty || cur == entryTombstone {
			if cur == entryEmpty {
				f.used++
			}
			f.slots[i].seen.Store(f.clock.Now())
			f.fill(i, k, v)
			f.live.Add(1)
			if !static {
				f.countLearned(port, 1)
			}
			if f.changed != nil {
				f.changed()
			}
			return nil
		}
		i = (i + 1) & f.mask
	}
}

// Delete removes key k (FDBKey).
func (f *FDB) Delete(k uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if s := f.slot(k); s >= 0 && f.slots[s].key.Load() != entryEmpty {
		f.removeLocked(s)
	}
}

// removeLocked makes slot s a tombstone. Called under mu.
func (f *FDB) removeLocked(s int) {
	v := f.slots[s].val.Load()
	f.slots[s].key.Store(entryTombstone)
	f.live.Add(-1)
	if v&valStatic == 0 {
		f.countLearned(valPort(v), -1)
	}
}

// FlushPort removes every learned entry of port (the port went away);
// static entries of the port go too.
func (f *FDB) FlushPort(port int) int {
	return f.sweep(func(_ uint64, v uint64, _ uint32) bool { return valPort(v) == port })
}

// Age removes learned entries not seen for maxAge seconds and returns how
// many it removed.
func (f *FDB) Age(maxAge uint32) int {
	now := f.clock.Now()
	return f.sweep(func(_ uint64, v uint64, seen uint32) bool { return v&valStatic == 0 && now-seen >= maxAge })
}

// NextExpiry is the Clock second at which the first learned entry ages
// out after maxAge seconds, and false if no learned entry exists: the
// housekeeper sleeps until then when nothing else needs the clock.
func (f *FDB) NextExpiry(maxAge uint32) (uint32, bool) {
	var next uint32
	found := false
	for i := range f.slots {
		sl := &f.slots[i]
		if !liveKey(sl.key.Load()) || sl.val.Load()&valStatic != 0 {
			continue
		}
		if at := sl.seen.Load() + maxAge; !found || at < next {
			next, found = at, true
		}
	}
	return next, found
}

func (f *FDB) sweep(drop func(key uint64, val uint64, seen uint32) bool) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for i := range f.slots {
		e := f.slots[i].key.Load()
		if !liveKey(e) {
			continue
		}
		if drop(e&keyMask, f.slots[i].val.Load(), f.slots[i].seen.Load()) {
			f.removeLocked(i)
			n++
		}
	}
	// Too many tombstones make misses probe far: when over half of the
	// used slots are dead, rebuild in place. Readers may miss an entry
	// during the rebuild and flood that frame, which is harmless; the
	// generations keep them from pairing a key with another's port.
	if f.used > 0 && int(f.live.Load())*2 < f.used && f.used > len(f.slots)/4 {
		f.rehashLocked()
	}
	return n
}

func (f *FDB) rehashLocked() {
	type kept struct {
		k    uint64
		v    uint64
		seen uint32
	}
	var all []kept
	for i := range f.slots {
		e := f.slots[i].key.Load()
		if liveKey(e) {
			all = append(all, kept{e & keyMask, f.slots[i].val.Load() &^ (0xf << valGenShift), f.slots[i].seen.Load()})
		}
		f.slots[i].key.Store(entryEmpty)
	}
	f.used = 0
	for _, k := range all {
		i := hashMAC(k.k) & f.mask
		for f.slots[i].key.Load() != entryEmpty {
			i = (i + 1) & f.mask
		}
		f.slots[i].seen.Store(k.seen)
		f.fill(i, k.k, k.v)
		f.used++
	}
}

// Entry is one MAC of the table, as Entries reads it. The switch turns it
// into a ctl.FDBRow (port index to port name) for `show fdb`.
type Entry struct {
	MAC    uint64 // a MAC key (MACKey)
	VLAN   uint16 // the VLAN it was learned in (0: untagged on ports without VLAN settings)
	Port   int    // port index
	Static bool   // configured, never aged
	Age    uint32 // seconds since the MAC was last seen
}

// Entries returns a snapshot of the table.
func (f *FDB) Entries() []Entry {
	now := f.clock.Now()
	var out []Entry
	for i := range f.slots {
		e := f.slots[i].key.Load()
		if !liveKey(e) {
			continue
		}
		v := f.slots[i].val.Load()
		out = append(out, Entry{
			MAC:    e & macMask,
			VLAN:   uint16(e >> vlanShift & 0xfff),
			Port:   valPort(v),
			Static: v&valStatic != 0,
			Age:    now - f.slots[i].seen.Load(),
		})
	}
	return out
}

// Len is the number of live entries.
func (f *FDB) Len() int { return int(f.live.Load()) }

// Refused is how many MACs could not be learned because the table was full.
func (f *FDB) Refused() uint64 { return f.full.Load() }
