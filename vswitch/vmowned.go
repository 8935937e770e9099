package vswitch

import (
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/xvswitch/xvswitch/bpf"
	"github.com/xvswitch/xvswitch/portspec"
	"github.com/xvswitch/xvswitch/vhost"
	"github.com/xvswitch/xvswitch/xsk"
)

// ownerSockets are a VM port's sockets on the NIC queues it owns
// (own=IFNAME:Q), bound to a UMEM registered over the VM's memory: the
// range vhost maps its memory table into (vhost.Config.Contiguous), the
// switch-owned area first. The kernel receives into the guest's own RX
// buffers (vmzerocopy.go) and, unless the port enforces its source MAC,
// transmits the guest's frames from its TX buffers (vmzctx.go); what does
// not qualify goes through the switch and is copied (docs/zerocopy.md).
//
// The sockets live as long as one memory table: vhost calls memoryChanged
// with the rings paused before it unmaps the old range; the sockets on it
// are closed then (posted fill buffers cannot be taken back), and new
// ones are built on the new range afterwards, off the control path. In
// between, the VM's frames on its queues go to the kernel, counted as
// xdp_no_socket_passed. A registration or bind that fails gives the
// queues back to the NIC port (copy path, the NIC's own sockets) with a
// log line saying why, until the next memory table.
type ownerSockets struct {
	sw   *Switch
	name string
	own  portspec.Own
	mac  net.HardwareAddr
	dev  *vhost.Device
	// sendsZC: the port does not enforce its source MAC (spoof=allow),
	// so its sockets get TX rings for the zero-copy transmit path.
	sendsZC bool

	// mu serialises building and tearing down. Lock order: the switch's
	// mu before this one (build), never the other way.
	mu     sync.Mutex
	added  bool // the port is on the switch and its queues handed over
	closed bool
	gen    uint64 // the memory generation the sockets are for (0: none)
	umem   *xsk.UMEM
	socks  map[int]*xsk.Socket
	zc     map[int]*zcRx // the sockets' zero-copy receive state
	ztx    map[int]*zcTx // their zero-copy transmit state (sendsZC)
	nic    *nicPort      // the port the sockets sit in
	steer  *bpf.Steering // its steering, whose slots hold them
	failed uint64        // the generation whose build failed (no retry)
	// rule is the ethtool ntuple rule steering the VM's MAC to its first
	// owned queue, if the NIC took one (ruleSet).
	rule    uint32
	ruleSet bool
}

// Owner socket geometry (docs/zerocopy.md has the arithmetic). Chunks of
// 2048 bytes with 268 bytes of headroom leave frame_len = 2048 - 268 -
// 256 = 1524: a frame lands 524 bytes into its chunk, so a fill address
// 512 bytes in front of a guest buffer puts the frame right behind the
// buffer's 12-byte virtio-net header, and a Linux guest's ~1536-byte
// mergeable RX buffer holds frame_len + 12.
const (
	ownerChunk    = 2048
	ownerHeadroom = 268
	ownerRing     = 1024          // fill and RX ring entries per owned queue
	ownerFrames   = 2 * ownerRing // switch-area frames per owned queue
	ownerAreaPerQ = ownerFrames * ownerChunk
	// ownerMemoryChangeTimeout: how long vhost lets memoryChanged take
	// (it waits for the NIC's workers to let go of the old sockets).
	ownerMemoryChangeTimeout = 5 * time.Second
)

// registerOwnerUMEM registers the range (a variable: tests make it fail
// as the kernel can, for the fallback).
var registerOwnerUMEM = xsk.NewUMEMFromMemory

// ownerSwitchArea is the switch-owned area an owner of n queues needs.
func ownerSwitchArea(n int) uint64 { return uint64(n) * ownerAreaPerQ }

func newOwnerSockets(sw *Switch, spec portspec.Vhost, mac net.HardwareAddr) *ownerSockets {
	// A port that checks source MACs must see each frame as it leaves:
	// one sent from the guest's memory could be rewritten after the
	// check, so such a port transmits through the copy path only.
	enforced := spec.MAC != "" && !spec.AllowSpoof
	return &ownerSockets{sw: sw, name: spec.Name, own: *spec.Own, mac: mac, sendsZC: !enforced}
}

// memoryChanged is the device's vhost.Config.OnMemoryChange: the old
// range's sockets go now, before vhost unmaps it; the new range's are
// built on another goroutine (building takes the switch's lock, which the
// control path may hold while it waits for this call).
func (o *ownerSockets) memoryChanged(ch vhost.MemoryChange) {
	o.mu.Lock()
	o.teardown("memory table replaced")
	o.mu.Unlock()
	if ch.New != nil {
		go o.build(ch.Generation)
	}
}

// ringStopping is the device's vhost.Config.OnRxStop (and OnTxStop with
// sendsZC): a ring is about to stop (or the memory table to change). The
// guest buffers lent to the kernel, and the TX chains whose frames it
// reads, must be returned on that ring, which is only sound once nothing
// can write or read them: the sockets close now, and new ones are built
// once the ring has left the data path (rebuildAfterStop; their lending
// resumes when a ring runs again). Bounded: building may hold o.mu for a
// bind's EBUSY wait; past the bound the control path goes on and the lent
// buffers are forgotten by the ring's next Reset instead of returned.
func (o *ownerSockets) ringStopping(index int) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		o.mu.Lock()
		bound := o.umem != nil
		o.teardown("a ring stops")
		o.mu.Unlock()
		if bound {
			go o.rebuildAfterStop(index)
		}
	}()
	t := time.NewTimer(ownerMemoryChangeTimeout)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		slog.Error("vhost: closing the owned queues' sockets before a ring stops took too long; lent guest buffers and held TX chains are not returned", "port", o.name, "queue", index)
	}
}

// rebuildAfterStop builds new sockets once the ring that is stopping has
// left the data path: sockets built before might lend buffers of that
// ring, which its stop would then forget while the kernel holds them.
// vhost takes the ring away right after OnRxStop returns, so seeing it
// not running (or, if it restarted at once, a second's wait) is enough.
func (o *ownerSockets) rebuildAfterStop(index int) {
	q := o.dev.Queue(index)
	for end := time.Now().Add(time.Second); q.Running() && time.Now().Before(end); {
		time.Sleep(5 * time.Millisecond)
	}
	if l := o.dev.MemoryLayout(); l != nil {
		o.build(l.Generation())
	}
}

// start runs once the port is on the switch and the NIC port let go of
// the queues: a memory table that came before is built on now.
func (o *ownerSockets) start() {
	o.mu.Lock()
	o.added = true
	o.installRule()
	o.mu.Unlock()
	if l := o.dev.MemoryLayout(); l != nil {
		go o.build(l.Generation())
	}
}

// renew rebuilds the sockets on the current memory table: the NIC port
// they sat in was bound to a new interface (deleted and made again) or
// added again, whose XSKMAP slots and queues know nothing of them. Called
// with s.mu held; the rebuild runs after the caller lets go of it.
func (o *ownerSockets) renew() {
	o.mu.Lock()
	o.teardown("the NIC port re-attached")
	o.failed = 0
	added := o.added
	o.mu.Unlock()
	if l := o.dev.MemoryLayout(); added && l != nil {
		go o.build(l.Generation())
	}
}

// renewOwners renews the owners' sockets on ifname. Called with s.mu held.
func (s *Switch) renewOwners(ifname string) {
	for _, p := range s.ports {
		if p == nil {
			continue
		}
		if v, ok := p.drv.(*vhostPort); ok && v.owner != nil && v.owner.own.Ifname == ifname {
			v.owner.renew()
		}
	}
}

// build registers the current memory range as a UMEM and binds a socket
// to each owned queue, if gen is still the current table.
func (o *ownerSockets) build(gen uint64) {
	sw := o.sw
	sw.mu.Lock()
	defer sw.mu.Unlock()
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed || !o.added {
		return
	}
	l := o.dev.MemoryLayout()
	if l == nil || l.Generation() != gen || o.gen == gen || o.failed == gen {
		return
	}
	if o.umem != nil {
		// Bound on another table (a rebuild after a ring stop raced
		// with a memory change): never bind twice, the old sockets
		// would hold the queues.
		o.teardown("a newer memory table")
	}
	nic := sw.nicOn(o.own.Ifname)
	if nic == nil || nic.bound == nil {
		slog.Warn("vhost: owned queues have no NIC port to sit in yet; the VM's frames take the copy path",
			"port", o.name, "own", o.own.String())
		return
	}
	if sw.owners.inFallback(o.name) {
		// A new table: try again, the NIC port letting go first.
		sw.owners.setFallback(o.name, false)
		sw.handOver(o.own.Ifname)
	}
	if err := o.bind(l, nic); err != nil {
		o.teardown("binding failed")
		o.failed = gen
		sw.owners.setFallback(o.name, true)
		sw.handOver(o.own.Ifname)
		slog.Warn("vhost: the VM's memory cannot back its owned NIC queues; they go back to the NIC port and its frames take the copy path until the next memory table",
			"port", o.name, "own", o.own.String(), "why", err)
		return
	}
	o.gen = gen
	slog.Info("vhost: owned NIC queues bound on the VM's memory", "port", o.name, "own", o.own.String(),
		"generation", gen, "range_bytes", l.Len(), "af_xdp", nic.bound.mode())
}

// bind is build's work: the UMEM, then one RX-only socket per owned queue,
// each in its XSKMAP slot and on the NIC port's queue, whose worker
// receives from it.
func (o *ownerSockets) bind(l *vhost.MemoryLayout, nic *nicPort) error {
	if _, area := l.Area(); area < ownerSwitchArea(len(o.own.Queues)) {
		return fmt.Errorf("switch area of %d bytes, want %d", area, ownerSwitchArea(len(o.own.Queues)))
	}
	u, err := registerOwnerUMEM(l.Range(), xsk.UMEMConfig{FrameSize: ownerChunk, Headroom: ownerHeadroom, Unaligned: true})
	if err != nil {
		return fmt.Errorf("registering %d bytes of guest memory as a UMEM: %w", l.Len(), err)
	}
	o.umem, o.socks, o.nic, o.steer = u, map[int]*xsk.Socket{}, nic, nic.bound.steer
	o.zc, o.ztx = map[int]*zcRx{}, map[int]*zcTx{}
	// ManualFill: the zero-copy path decides what goes on the fill ring,
	// the guest's buffers or the switch area's (vmzerocopy.go).
	rxOnly := xsk.SocketConfig{Mode: socketMode(nic.spec.Mode), NoTX: true, RXSize: ownerRing, FillSize: ownerRing, Frames: ownerFrames, ManualFill: true}
	// With a TX ring for the guest's own frames (vmzctx.go): only where
	// a TX queue will use it, since poll() on a socket with a TX ring
	// runs the kernel's TX path.
	withTX := rxOnly
	withTX.NoTX, withTX.CallerTX, withTX.TXSize, withTX.CompletionSize = false, true, ownerTXRing, ownerTXRing
	for i, q := range o.own.Queues {
		if q >= len(nic.queues) {
			return fmt.Errorf("queue %d: the NIC port has %d queues", q, len(nic.queues))
		}
		from := o.txQueue(i)
		cfg := rxOnly
		if from != nil {
			cfg = withTX
		}
		s, err := bindQueue(u, nic.bound.ifindex, q, cfg)
		if err != nil {
			return fmt.Errorf("queue %d: %w", q, err)
		}
		o.socks[q] = s
		nic.ownerSocks.add(s)
		z := o.newZC(l, s, i)
		if z != nil {
			if err := z.watch(nic.queues[q].epfd); err != nil {
				return fmt.Errorf("queue %d: the zero-copy path's timer: %w", q, err)
			}
			o.zc[q] = z
			// The worker polling the queue lends what the guest posted
			// already, at the timer's first tick: not here. A worker
			// that alone polls anything transmits to the VM's queue
			// without its egress lock (snapshot.solo), which service's
			// TryLock would then take beside it.
			z.retry(true)
		} else {
			s.Refill() // the copy path only
		}
		if err := o.steer.SetSocket(uint32(q), s.FD()); err != nil {
			return fmt.Errorf("queue %d: %w", q, err)
		}
		if z != nil {
			nic.queues[q].zc.Store(z)
		}
		nic.queues[q].attach(s)
		if from != nil {
			_, area := l.Area()
			t := &zcTx{sock: s, base: l.Base(), area: area, size: l.Len(), link: nic.queues[q].link, from: from}
			o.ztx[q] = t
			from.zc.Store(t)
		}
	}
	return nil
}

// txQueue is the VM's TX queue whose frames go out through the socket of
// its i-th owned queue (queue pair i), if the port sends without a copy
// and has that pair; nil otherwise. Called with the switch's lock held.
func (o *ownerSockets) txQueue(i int) *vhostFromGuest {
	if !o.sendsZC {
		return nil
	}
	p := o.sw.byName[o.name]
	if p == nil {
		return nil
	}
	v, ok := p.drv.(*vhostPort)
	if !ok || i >= len(v.fromGuest) || v.fromGuest[i].idle == nil {
		return nil
	}
	return v.fromGuest[i]
}

// teardown takes the sockets out of their slots and queues, waits for the
// NIC's workers to let go of them, and closes them and the UMEM. Called
// with o.mu held.
func (o *ownerSockets) teardown(why string) {
	if o.umem == nil {
		return
	}
	// The transmit side first: once closed, no worker sends on a socket
	// or reaps it (its burst takes the zcTx's lock).
	for _, t := range o.ztx {
		t.close()
	}
	var discarded uint64
	for q, s := range o.socks {
		_ = o.steer.RemoveSocket(uint32(q)) // ErrClosed: the NIC's program is gone already
		o.nic.queues[q].zc.CompareAndSwap(o.zc[q], nil)
		if !o.nic.queues[q].detachWait(s, time.Second) {
			slog.Error("vhost: a NIC worker did not let go of an owned queue's socket in 1 s", "port", o.name, "queue", q)
			continue
		}
		discarded += drainRX(s)
	}
	for q, s := range o.socks {
		o.nic.ownerSocks.retire(s) // before the UMEM closes them
		if z := o.zc[q]; z != nil {
			z.unwatch(o.nic.queues[q].epfd)
		}
	}
	o.nic.events.ownerDiscarded.Add(discarded)
	if err := o.umem.Close(); err != nil {
		slog.Warn("vhost: closing the owned queues' UMEM", "port", o.name, "err", err)
	}
	// Closed: the kernel writes no lent guest buffer any more, so the
	// VM's queues may give them back (empty) to the guest.
	for _, z := range o.zc {
		z.abandon(z.vmq.Receiver())
	}
	// Nor does it read the frames of TX chains held for it: the TX
	// queues give them back (used, length 0) at their next call, the
	// rebind's Complete when a ring stops.
	for _, t := range o.ztx {
		if tx := t.from.q.Transmitter(); tx != nil {
			tx.AbandonHeld()
		}
	}
	slog.Info("vhost: owned NIC queues unbound", "port", o.name, "why", why, "generation", o.gen)
	o.umem, o.socks, o.nic, o.steer, o.gen, o.zc, o.ztx = nil, nil, nil, nil, 0, nil, nil
}

// state is what show ports says of the owned queues' sockets: "bound"
// (on the VM's memory), "copy" (given back to the NIC port after a
// refused registration) or "unbound" (no memory table yet, or between
// two).
func (o *ownerSockets) state() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	switch {
	case o.gen != 0:
		return "bound"
	case o.sw.owners.inFallback(o.name):
		return "copy"
	}
	return "unbound"
}

// drainRX empties s's RX ring: frames the kernel delivered that no worker
// received before the socket closes. They never reached the switch, so
// they are the kernel side's to count (owner_rx_discarded), like the
// sockets' own drops, not a drop of the switch's ledger.
func drainRX(s *xsk.Socket) uint64 {
	var descs [MaxBurst]xsk.Desc
	var n uint64
	for {
		k := s.Receive(descs[:])
		if k == 0 {
			return n
		}
		s.Release(descs[:k])
		n += uint64(k)
	}
}

// close tears down for good: the port is being removed.
func (o *ownerSockets) close() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.closed = true
	o.teardown("port removed")
	if o.ruleSet {
		if err := delMACRule(o.own.Ifname, o.rule); err != nil {
			slog.Warn("vhost: removing the owner's ntuple rule", "port", o.name, "err", err)
		}
		o.ruleSet = false
	}
}

// installRule asks the NIC to receive the VM's MAC on its first owned
// queue (an ethtool ntuple rule, as `ethtool -N IFNAME flow-type ether
// dst MAC action Q`). Where the NIC cannot, the VM still works: frames
// that arrive elsewhere take the copy path; the log says how to steer
// instead (docs/zerocopy.md). One MAC steers to one queue. Called with
// o.mu held.
func (o *ownerSockets) installRule() {
	q := o.own.Queues[0]
	loc, err := addMACRule(o.own.Ifname, o.mac, q)
	if err != nil {
		slog.Warn("vhost: the NIC did not take a rule steering the VM's MAC to its owned queue; its frames arriving on other queues take the copy path",
			"port", o.name, "own", o.own.String(), "err", err)
		return
	}
	o.rule, o.ruleSet = loc, true
	slog.Info("vhost: ntuple rule steers the VM's MAC to its owned queue", "port", o.name, "ifname", o.own.Ifname, "queue", q, "location", loc)
}

// nicOn is the NIC port on ifname, nil if none. Called with s.mu held.
func (s *Switch) nicOn(ifname string) *nicPort {
	for _, p := range s.ports {
		if p == nil {
			continue
		}
		if n, ok := p.drv.(*nicPort); ok && n.spec.Ifname == ifname {
			return n
		}
	}
	return nil
}
