package vswitch

import (
	"encoding/binary"
	"errors"
	"net"
	"sync"
	"sync/atomic"
)

// FDB is the learning bridge's forwarding database: MAC address -> port.
//
// Every frame reads it (destination lookup) and every frame's source MAC is
// checked against it, from several workers at once; it changes rarely (a
// new MAC, a MAC that moved, aging). So reads are lock-free loads of
// single 64-bit entries in an open-addressing table, and writers (learning
// a new or moved MAC, aging, static entries) serialise on a mutex that the
// per-frame path takes only when something actually changes.
type FDB struct {
	entries []atomic.Uint64 // see entry encoding below; len is a power of two
	seen    []atomic.Uint32 // last time (Clock seconds) the source MAC was seen
	mask    uint64

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

// Entry encoding: bits 0-47 the MAC, bits 48-62 the port index + 1, bit 63
// static (configured, never aged). 0 is an empty slot; an entry with port
// field 0 and MAC 1 is a tombstone (a deleted entry that keeps probe chains
// intact).
const (
	entryEmpty     = 0
	entryTombstone = 1
	entryStatic    = 1 << 63
	portShift      = 48
	portMask       = 0x7fff
	macMask        = 1<<48 - 1
	// MaxPorts bounds port indexes an FDB entry can hold.
	MaxPorts = portMask - 1
)

// entryPort is the port index an entry holds.
func entryPort(e uint64) int { return int(e>>portShift&portMask) - 1 }

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
		entries: make([]atomic.Uint64, n),
		seen:    make([]atomic.Uint32, n),
		mask:    uint64(n - 1),
		clock:   clock,
	}
}

// MACKey packs a 6-byte MAC into the low 48 bits of a uint64.
func MACKey(mac []byte) uint64 {
	_ = mac[5]
	return uint64(binary.BigEndian.Uint16(mac[0:2]))<<32 | uint64(binary.BigEndian.Uint32(mac[2:6]))
}

// MACString formats a MAC key.
func MACString(k uint64) string {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], k)
	return net.HardwareAddr(b[2:8]).String()
}

func hashMAC(k uint64) uint64 {
	// The low bytes of a MAC vary most (vendors own the top three), but a
	// multiply-shift mixes all of them cheaply.
	return (k * 0x9E3779B97F4A7C15) >> 20
}

// slot finds k: it returns the slot index holding k, or -1.
func (f *FDB) slot(k uint64) int {
	s, _ := f.find(k)
	return s
}

// find returns the slot holding k and its entry, or -1 and entryEmpty.
// The entry is the one load that matched, so a reader never reloads it
// (and never sees a second, different value).
func (f *FDB) find(k uint64) (int, uint64) {
	i := hashMAC(k) & f.mask
	for n := uint64(0); n <= f.mask; n++ {
		e := f.entries[i].Load()
		if e == entryEmpty {
			return -1, entryEmpty
		}
		if e != entryTombstone && e&macMask == k {
			return int(i), e
		}
		i = (i + 1) & f.mask
	}
	return -1, entryEmpty
}

// Lookup returns the port MAC k was learned on, or NoPort.
func (f *FDB) Lookup(k uint64) int {
	if s, e := f.find(k); s >= 0 {
		return entryPort(e)
	}
	return NoPort
}

// Learn records that source MAC k was seen on port. The common case (k
// known on that port, seen this second already) is three loads: the
// entry, the clock and its timestamp. It does not learn group addresses
// or the zero MAC, nor a new MAC on a port that holds its limit of them
// (that is counted, LearnRefused).
func (f *FDB) Learn(k uint64, port int) {
	if k&(1<<40) != 0 || k == 0 { // multicast/broadcast bit of the first octet, or 00:00:..
		return
	}
	s, e := f.find(k)
	f.learnFound(k, port, s, e)
}

// learnFound is Learn once find(k) returned slot s and its entry e: the
// forwarding path calls find itself, where the compiler inlines it.
func (f *FDB) learnFound(k uint64, port, s int, e uint64) {
	if s >= 0 && (entryPort(e) == port || e&entryStatic != 0) {
		if now := f.clock.Now(); f.seen[s].Load() != now {
			f.seen[s].Store(now)
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

// AddStatic pins MAC k to port; it never ages out and learning never moves it.
func (f *FDB) AddStatic(k uint64, port int) error { return f.put(k, port, true) }

func (f *FDB) put(k uint64, port int, static bool) error {
	e := k | uint64(port+1)<<portShift
	if static {
		e |= entryStatic
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	// A learned entry counts against its port's limit: a new one, or one
	// moving in from another port, must fit (checked again here because
	// two workers may poll queues of one port).
	l := f.limit(port)
	if s := f.slot(k); s >= 0 {
		old := f.entries[s].Load()
		if old&entryStatic != 0 && !static {
			return nil
		}
		if !static && entryPort(old) != port && l.full() {
			l.refused.Add(1)
			return ErrPortMACLimit
		}
		if old&entryStatic == 0 {
			f.countLearned(entryPort(old), -1)
		}
		if !static {
			f.countLearned(port, 1)
		}
		f.entries[s].Store(e)
		f.seen[s].Store(f.clock.Now())
		if old&^entryStatic != e&^entryStatic && f.changed != nil {
			f.changed()
		}
		return nil
	}
	if !static && l.full() {
		l.refused.Add(1)
		return ErrPortMACLimit
	}
	if f.used+1 > len(f.entries)/2 {
		f.full.Add(1)
		return ErrFDBFull
	}
	i := hashMAC(k) & f.mask
	for {
		cur := f.entries[i].Load()
		if cur == entryEmpty || cur == entryTombstone {
			if cur == entryEmpty {
				f.used++
			}
			f.seen[i].Store(f.clock.Now())
			f.entries[i].Store(e)
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

// Delete removes MAC k.
func (f *FDB) Delete(k uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if s := f.slot(k); s >= 0 {
		f.removeLocked(s)
	}
}

// removeLocked makes slot s a tombstone. Called under mu.
func (f *FDB) removeLocked(s int) {
	e := f.entries[s].Load()
	f.entries[s].Store(entryTombstone)
	f.live.Add(-1)
	if e&entryStatic == 0 {
		f.countLearned(entryPort(e), -1)
	}
}

// FlushPort removes every learned entry of port (the port went away);
// static entries of the port go too.
func (f *FDB) FlushPort(port int) int {
	return f.sweep(func(e uint64, _ uint32) bool { return entryPort(e) == port })
}

// Age removes learned entries not seen for maxAge seconds and returns how
// many it removed.
func (f *FDB) Age(maxAge uint32) int {
	now := f.clock.Now()
	return f.sweep(func(e uint64, seen uint32) bool { return e&entryStatic == 0 && now-seen >= maxAge })
}

// NextExpiry is the Clock second at which the first learned entry ages
// out after maxAge seconds, and false if no learned entry exists: the
// housekeeper sleeps until then when nothing else needs the clock.
func (f *FDB) NextExpiry(maxAge uint32) (uint32, bool) {
	var next uint32
	found := false
	for i := range f.entries {
		e := f.entries[i].Load()
		if e == entryEmpty || e == entryTombstone || e&entryStatic != 0 {
			continue
		}
		if at := f.seen[i].Load() + maxAge; !found || at < next {
			next, found = at, true
		}
	}
	return next, found
}

func (f *FDB) sweep(drop func(e uint64, seen uint32) bool) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for i := range f.entries {
		e := f.entries[i].Load()
		if e == entryEmpty || e == entryTombstone {
			continue
		}
		if drop(e, f.seen[i].Load()) {
			f.removeLocked(i)
			n++
		}
	}
	// Too many tombstones make misses probe far: when over half of the
	// used slots are dead, rebuild in place. Readers may miss an entry
	// during the rebuild and flood that frame, which is harmless.
	if f.used > 0 && int(f.live.Load())*2 < f.used && f.used > len(f.entries)/4 {
		f.rehashLocked()
	}
	return n
}

func (f *FDB) rehashLocked() {
	type kept struct {
		e    uint64
		seen uint32
	}
	var all []kept
	for i := range f.entries {
		e := f.entries[i].Load()
		if e != entryEmpty && e != entryTombstone {
			all = append(all, kept{e, f.seen[i].Load()})
		}
		f.entries[i].Store(entryEmpty)
	}
	f.used = 0
	for _, k := range all {
		i := hashMAC(k.e&macMask) & f.mask
		for f.entries[i].Load() != entryEmpty {
			i = (i + 1) & f.mask
		}
		f.seen[i].Store(k.seen)
		f.entries[i].Store(k.e)
		f.used++
	}
}

// Entry is one MAC of the table, as Entries reads it. The switch turns it
// into a ctl.FDBRow (port index to port name) for `show fdb`.
type Entry struct {
	MAC    uint64 // a MAC key (MACKey)
	Port   int    // port index
	Static bool   // configured, never aged
	Age    uint32 // seconds since the MAC was last seen
}

// Entries returns a snapshot of the table.
func (f *FDB) Entries() []Entry {
	now := f.clock.Now()
	var out []Entry
	for i := range f.entries {
		e := f.entries[i].Load()
		if e == entryEmpty || e == entryTombstone {
			continue
		}
		out = append(out, Entry{
			MAC:    e & macMask,
			Port:   int(e>>portShift&portMask) - 1,
			Static: e&entryStatic != 0,
			Age:    now - f.seen[i].Load(),
		})
	}
	return out
}

// Len is the number of live entries.
func (f *FDB) Len() int { return int(f.live.Load()) }

// Refused is how many MACs could not be learned because the table was full.
func (f *FDB) Refused() uint64 { return f.full.Load() }
