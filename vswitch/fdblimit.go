package vswitch

import (
	"errors"
	"math"
	"sync/atomic"
)

// Per-port learning limits. The table is shared by all ports; without a
// limit one guest sending from random source MACs fills it, after which no
// other port's new MAC is learned and unicast to those MACs is flooded,
// to the attacker too. So each port may hold at most its limit of learned
// entries at once (static entries do not count); beyond it, a new source
// MAC is not learned and counted as refused, and its frame is still
// forwarded, as Linux bridge and OVS do when their tables are full.

// ErrPortMACLimit means a port already holds as many learned MACs as its
// limit allows.
var ErrPortMACLimit = errors.New("vswitch: port's MAC limit reached")

// portMACs is one port's share of the table.
type portMACs struct {
	max     int32         // learned entries the port may hold at once
	learned atomic.Int32  // its learned entries; written under FDB.mu
	refused atomic.Uint64 // new MACs not learned because it was at max
}

// full says the port may learn no more MACs. The per-frame path asks it
// without the FDB's mutex, so a port at its limit sending new MACs costs
// a load and a counter, never the lock; put asks again under the mutex.
func (l *portMACs) full() bool { return l != nil && l.learned.Load() >= l.max }

// SetLimit gives port a fresh share of the table: at most maxMACs learned
// MACs at once (0: no limit but the table's), none refused yet. The switch
// calls it when a port takes an index, before any frame of it is
// forwarded. The copy-on-write slice keeps limit a lock-free load for the
// per-frame path; ports are added rarely.
func (f *FDB) SetLimit(port, maxMACs int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var l *portMACs
	if maxMACs > 0 {
		l = &portMACs{max: int32(min(maxMACs, math.MaxInt32))}
		for i := range f.slots {
			if v := f.slots[i].val.Load(); liveKey(f.slots[i].key.Load()) && v&valStatic == 0 && valPort(v) == port {
				l.learned.Add(1)
			}
		}
	}
	old := f.limits.Load()
	n := 0
	if old != nil {
		n = len(*old)
	}
	lims := make([]*portMACs, max(n, port+1))
	if old != nil {
		copy(lims, *old)
	}
	lims[port] = l
	f.limits.Store(&lims)
}

// limit is port's share, or nil if it has no limit.
func (f *FDB) limit(port int) *portMACs {
	lims := f.limits.Load()
	if lims == nil || port < 0 || port >= len(*lims) {
		return nil
	}
	return (*lims)[port]
}

// countLearned adds d to the learned entries of port, if it has a limit.
// Called under mu.
func (f *FDB) countLearned(port int, d int32) {
	if l := f.limit(port); l != nil {
		l.learned.Add(d)
	}
}

// LearnRefused is how many new MACs port was refused because it held its
// limit of learned MACs.
func (f *FDB) LearnRefused(port int) uint64 {
	if l := f.limit(port); l != nil {
		return l.refused.Load()
	}
	return 0
}
