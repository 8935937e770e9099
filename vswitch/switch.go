package vswitch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/xvswitch/xvswitch/portspec"
)

// ErrNoPort means a named port does not exist.
var ErrNoPort = errors.New("vswitch: no such port")

// ErrPortExists means a port of that name is already on the switch.
var ErrPortExists = errors.New("vswitch: port exists")

// ErrTooManyPorts means the switch has no free port index (MaxPorts).
var ErrTooManyPorts = errors.New("vswitch: too many ports")

// Switch is a running xvswitch: ports, workers, FDB.
type Switch struct {
	cfg   Config
	clock Clock
	fdb   *FDB
	snap  atomic.Pointer[snapshot]

	mu      sync.Mutex // the control plane: ports, snapshots
	ports   []*port
	byName  map[string]*port
	gen     uint64
	workers []*worker
	wg      sync.WaitGroup
	start   time.Time
	// fdbChanged wakes the housekeeper when a MAC was learned or moved.
	fdbChanged chan struct{}
	// awake tells the housekeeper that a worker woke (workerAwake).
	awake  chan struct{}
	caps   captures    // running captures (capture.go)
	owners queueOwners // NIC queues owned by VMs (owned.go)
	// announcing: the queues of RARPs being sent (announce.go), which
	// worker 0 polls; their ports are in ports.
	announcing []*ingress
}

// New makes a switch with no ports; Run starts it.
func New(cfg Config) (*Switch, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.IdleAfter == 0 {
		cfg.IdleAfter = DefaultIdleAfter
	}
	if cfg.RxBackoff == 0 {
		cfg.RxBackoff = DefaultRxBackoff
	}
	s := &Switch{cfg: cfg, byName: map[string]*port{}, start: time.Now(), fdbChanged: make(chan struct{}, 1), awake: make(chan struct{}, 1)}
	s.fdb = NewFDB(portspec.FDBSize, &s.clock)
	s.fdb.changed = func() {
		select {
		case s.fdbChanged <- struct{}{}:
		default:
		}
	}
	s.snap.Store(buildSnapshot(0, nil, cfg.Workers, nil))
	for i := 0; i < cfg.Workers; i++ {
		cpu := -1
		if len(cfg.CPUs) > 0 {
			cpu = cfg.CPUs[i%len(cfg.CPUs)]
		}
		w, err := newWorker(s, i, cpu, cfg.IdleAfter)
		if err != nil {
			return nil, err
		}
		w.taps = &s.caps.table
		s.workers = append(s.workers, w)
	}
	return s, nil
}

// startWorkers runs the poll workers, with GOMAXPROCS at least one more
// than their number: each busy worker holds a P on its locked thread, and
// with none left the control path and a session's Notifier thread wait
// for the scheduler to preempt one (~10 ms; docs/architecture.md).
func (s *Switch) startWorkers() {
	if n := len(s.workers) + 1; runtime.GOMAXPROCS(0) < n {
		slog.Info("switch: raising GOMAXPROCS so the workers leave a P to the rest", "from", runtime.GOMAXPROCS(0), "to", n)
		runtime.GOMAXPROCS(n)
	}
	for _, w := range s.workers {
		w.running.Store(true)
		w.startedNs.Store(int64(time.Since(s.start)))
		s.wg.Add(1)
		go w.run(s.wg.Done)
	}
}

// stopWorkers stops the workers and waits for them.
func (s *Switch) stopWorkers() {
	for _, w := range s.workers {
		w.stop.Store(true)
		w.wake()
	}
	s.wg.Wait()
	for _, w := range s.workers {
		w.close()
	}
}

// publish installs a new snapshot of s.ports and waits until every running
// worker forwards with it. Called with s.mu held.
//
// A solo worker transmits without egress locks (egress.go), so no other
// worker may transmit while it still forwards with a snapshot that made
// it solo, and it may not start lock-free while another still forwards
// with an older snapshot. Workers forward with at most two snapshots at
// a time (this one and the last), so when the solo worker changes, the
// old port table is first published again with none solo, then the new
// one with none solo, each awaited, and only then the new one as it is.
func (s *Switch) publish() {
	old := s.snap.Load()
	s.announcing = slices.DeleteFunc(s.announcing, func(in *ingress) bool { return s.byName[in.port.name] != in.port })
	snap := buildSnapshot(0, append([]*port(nil), s.ports...), len(s.workers), s.announcing)
	if old.solo != snap.solo {
		if old.solo >= 0 {
			s.gen++
			s.install(old.withSolo(s.gen, -1))
		}
		if snap.solo >= 0 {
			s.gen++
			s.install(snap.withSolo(s.gen, -1))
		}
	}
	s.gen++
	snap.gen = s.gen
	s.install(snap)
}

// install makes snap what the workers forward with and waits until every
// running worker does. Called with s.mu held.
func (s *Switch) install(snap *snapshot) {
	s.snap.Store(snap)
	for _, w := range s.workers {
		w.wake()
	}
	deadline := time.Now().Add(5 * time.Second)
	for _, w := range s.workers {
		for w.running.Load() && w.seen.Load() < snap.gen && !w.stop.Load() {
			if time.Now().After(deadline) {
				slog.Error("switch: a worker did not pick up the new port table in 5 s", "worker", w.id)
				break
			}
			time.Sleep(50 * time.Microsecond)
		}
	}
}

// AddPort adds a port of a kind the switch does not build itself (the
// benchmark generator, tests) under name; mac, if not 0, is a MAC
// configured behind it (a static FDB entry). It may learn DefaultMaxMACs
// others and send from any.
func (s *Switch) AddPort(name string, drv PortDriver, mac uint64) error {
	_, err := s.addPort(name, drv, mac)
	return err
}

// addPort adds a port running drv with AddPort's security.
func (s *Switch) addPort(name string, drv PortDriver, mac uint64) (*port, error) {
	return s.addSecuredPort(name, drv, security{mac: mac, maxMACs: DefaultMaxMACs})
}

// addSecuredPort adds a port running drv with limits sec.
func (s *Switch) addSecuredPort(name string, drv PortDriver, sec security) (*port, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, dup := s.byName[name]; dup {
		return nil, fmt.Errorf("%w: %q", ErrPortExists, name)
	}
	idx := len(s.ports)
	for i, p := range s.ports {
		if p == nil {
			idx = i // reuse a deleted port's slot
			break
		}
	}
	if idx >= MaxPorts {
		return nil, fmt.Errorf("%w (max %d)", ErrTooManyPorts, MaxPorts)
	}
	p := newPort(idx, name, drv)
	p.spread(len(s.workers))
	p.mac, p.srcCheck = sec.mac, sec.srcCheck()
	p.vlan = newPortVLAN(sec.vlans)
	if sec.mac != 0 {
		// In each VLAN the port's frames are in (its VLAN 0 if it has no
		// settings).
		for _, vid := range p.vlan.staticVLANs() {
			if err := s.fdb.AddStatic(FDBKey(vid, sec.mac), idx); err != nil {
				return nil, fmt.Errorf("vswitch: port %q: %w", name, err)
			}
		}
	}
	s.fdb.SetLimit(idx, sec.maxMACs)
	if idx == len(s.ports) {
		s.ports = append(s.ports, p)
	} else {
		s.ports[idx] = p
	}
	s.byName[name] = p
	for _, x := range s.cfg.XConnects {
		if a, b := s.byName[x.A], s.byName[x.B]; a != nil && b != nil {
			a.peer.Store(int32(b.idx + 1))
			b.peer.Store(int32(a.idx + 1))
		}
	}
	s.publish()
	s.syncMACs()
	return p, nil
}

// DelPort removes a port: workers stop using it, then it is closed.
func (s *Switch) DelPort(name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.byName[name]
	if p == nil {
		return fmt.Errorf("%w: %q", ErrNoPort, name)
	}
	s.ports[p.idx] = nil
	delete(s.byName, name)
	s.publish()
	s.fdb.FlushPort(p.idx)
	s.syncMACs()
	defer s.ownerGone(name) // after Close: the owner's sockets are gone
	if err := p.drv.Close(); err != nil {
		slog.Warn("port removed", "port", name, "err", err)
		return err
	}
	slog.Info("port removed", "port", name)
	return nil
}

// syncMACs tells every NIC's XDP program the MACs that live behind the
// switch's other ports (configured, or learned from guests' frames), so it
// steers frames to those MACs to the switch and leaves the rest to the
// host. Called with s.mu held.
func (s *Switch) syncMACs() {
	for _, p := range s.ports {
		if p == nil {
			continue
		}
		st, ok := p.drv.(macSteerer)
		if !ok {
			continue
		}
		// FDB keys (FDBKey): the program steers each MAC in its VLAN,
		// and only in the VLANs the NIC carries.
		var macs []uint64
		for _, e := range s.fdb.Entries() {
			if e.Port != p.idx && p.vlan.carries(e.VLAN) {
				macs = append(macs, FDBKey(e.VLAN, e.MAC))
			}
		}
		if err := st.setMACs(macs); err != nil {
			slog.Warn("switch: updating the NIC's MAC steering", "port", p.name, "err", err)
		}
	}
}

// housekeep advances the FDB clock, ages entries and keeps the NICs' MAC
// maps in step with the FDB, until ctx ends. It wakes only when something
// needs it: once a second while a worker is awake (forwarding learns with
// the clock's timestamps), when the first learned MAC is due to age out,
// and when a MAC was learned or moved. An idle switch, its workers asleep,
// sleeps here too; a worker that wakes advances the clock itself and
// tells the housekeeper (workerAwake).
func (s *Switch) housekeep(ctx context.Context) {
	t := time.NewTimer(0)
	defer t.Stop()
	armed := true
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.fdbChanged:
			s.mu.Lock()
			s.syncMACs()
			s.mu.Unlock()
			// A new MAC ages out some day: the timer must be set.
		case <-s.awake:
			if armed {
				continue
			}
		case <-t.C:
			armed = false
			s.clock.Advance(s.seconds())
			if s.fdb.Age(uint32(s.cfg.FDBAge/time.Second)) > 0 {
				s.mu.Lock()
				s.syncMACs()
				s.mu.Unlock()
			}
		}
		// Since Go 1.23 (go.mod) Stop and Reset leave no stale tick in t.C.
		t.Stop()
		d, ok := s.nextHousekeeping()
		armed = ok
		if ok {
			t.Reset(d)
		}
	}
}

// seconds is the FDB clock's time now: seconds since the switch started.
func (s *Switch) seconds() uint32 { return uint32(time.Since(s.start) / time.Second) }

// nextHousekeeping is how long the housekeeper may sleep: until the next
// second while a worker is awake, else until the first learned MAC ages
// out; false: until something happens.
func (s *Switch) nextHousekeeping() (time.Duration, bool) {
	now := time.Since(s.start)
	untilSecond := time.Second - now%time.Second
	for _, w := range s.workers {
		if w.running.Load() && w.asleepAt.Load() == 0 {
			return untilSecond, true
		}
	}
	at, ok := s.fdb.NextExpiry(uint32(s.cfg.FDBAge / time.Second))
	if !ok {
		return 0, false
	}
	if d := time.Duration(at)*time.Second - now; d > untilSecond {
		return d, true
	}
	return untilSecond, true
}

// workerAwake tells the housekeeper that a worker stopped sleeping: the
// clock must move again. It never blocks.
func (s *Switch) workerAwake() {
	select {
	case s.awake <- struct{}{}:
	default:
	}
}
