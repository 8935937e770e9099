package vswitch

import (
	"fmt"
	"log/slog"
	"net"
	"sync/atomic"

	"github.com/xvswitch/xvswitch/ctl"
	"github.com/xvswitch/xvswitch/portspec"
	"github.com/xvswitch/xvswitch/vhost"
	"github.com/xvswitch/xvswitch/virtionet"
)

// vhostPort is a vhost-user virtio-net device towards one VM. The device
// outlives its guests: a guest that disconnects, breaks its rings or
// reconnects changes what the queues' Begin returns, never the port.
type vhostPort struct {
	spec      portspec.Vhost
	dev       *vhost.Device
	fromGuest []*vhostFromGuest // over the guest's TX virtqueues
	toGuest   []*vhostToGuest   // over the guest's RX virtqueues
	state     atomic.Value
	owner     *ownerSockets // the sockets of its owned NIC queues (own=), or nil
	// announce sends a RARP from a MAC on the port's behalf (SEND_RARP,
	// announce.go).
	announce func(mac net.HardwareAddr)
}

// vhostFromGuest is an ingress queue: the frames a guest sends on one of
// its TX virtqueues.
type vhostFromGuest struct {
	q   *vhost.Queue
	act *vhost.Active // between Receive and Release
	// zc is the zero-copy transmit path while the port's owned queue
	// sockets are bound (vmzctx.go); idle, for such ports, lets the
	// worker sleep with completions outstanding.
	zc   atomic.Pointer[zcTx]
	idle *txIdle
}

// vhostToGuest is an egress queue: it delivers frames into one of a
// guest's RX virtqueues.
type vhostToGuest struct {
	q      *vhost.Queue
	frames virtionet.Frames
	act    *vhost.Active // during Transmit, for sendAsIs
	// fin finishes offloaded frames the guest did not negotiate
	// (segment.go).
	fin *finisher
}

// AddVhost adds a vhost-user port.
func (s *Switch) AddVhost(spec portspec.Vhost) error {
	if s.hasPort(spec.Name) {
		return fmt.Errorf("%w: %q", ErrPortExists, spec.Name)
	}
	if err := s.claimQueues(spec); err != nil {
		return err
	}
	added := false
	defer func() {
		if !added {
			s.owners.release(spec.Name)
		}
	}()
	p := &vhostPort{spec: spec}
	p.announce = func(mac net.HardwareAddr) { s.announce(spec.Name, mac) }
	p.state.Store("waiting")
	var mac net.HardwareAddr
	var key uint64
	if spec.MAC != "" {
		var err error
		if mac, err = net.ParseMAC(spec.MAC); err != nil {
			return fmt.Errorf("vswitch: vhost %s: %w", spec.Name, err)
		}
		key = MACKey(mac)
	}
	cfg := vhost.Config{
		Name:       spec.Name,
		Path:       spec.Path,
		Client:     spec.Client,
		QueuePairs: spec.Queues,
		MAC:        mac,
		SocketMode: spec.Mode,
		SocketGID:  spec.GID,
		NoOffloads: spec.NoOffloads,
		RxBackoff:  s.cfg.RxBackoff,
		OnEvent:    p.event,
		// The device logs its own events (connected, ready with what was
		// negotiated, broken and why...), under the port's name.
		Logger: slog.Default().With("port", spec.Name),
	}
	if spec.Own != nil {
		// The owned queues' UMEM is the guest's memory as one range
		// with the switch's buffers in front (vmowned.go).
		p.owner = newOwnerSockets(s, spec, mac)
		cfg.Contiguous = true
		cfg.SwitchArea = ownerSwitchArea(len(spec.Own.Queues))
		cfg.OnMemoryChange = p.owner.memoryChanged
		cfg.OnRxStop = p.owner.ringStopping
		if p.owner.sendsZC {
			// Chains held for the zero-copy transmit path go back to
			// the guest before their ring stops (vmzctx.go).
			cfg.OnTxStop = p.owner.ringStopping
		}
		cfg.MemoryChangeTimeout = ownerMemoryChangeTimeout
		// The kernel returns fill buffers out of order, so the zero-copy
		// receive path will mark guest buffers used out of order: an
		// owner never offers IN_ORDER (docs/zerocopy.md).
		cfg.NoInOrder = true
	}
	dev, err := vhost.Open(cfg)
	if err != nil {
		return err
	}
	p.dev = dev
	if p.owner != nil {
		p.owner.dev = dev
	}
	for i := 0; i < dev.NumQueuePairs(); i++ {
		// vhost names virtqueues as the guest sees them.
		r := &vhostFromGuest{q: dev.TxQueue(i)}
		if p.owner != nil && p.owner.sendsZC && i < len(spec.Own.Queues) {
			if r.idle, err = newTxIdle(r.q.WaitFD()); err != nil {
				p.closeIdle()
				dev.Close()
				return fmt.Errorf("vswitch: vhost %s: the transmit queue's timer: %w", spec.Name, err)
			}
		}
		p.fromGuest = append(p.fromGuest, r)
		p.toGuest = append(p.toGuest, &vhostToGuest{q: dev.RxQueue(i)})
	}
	sec := security{mac: key, maxMACs: orDefault(spec.MaxMACs, DefaultMaxMACs), ownSource: !spec.AllowSpoof, vlans: spec.VLANs}
	if _, err := s.addSecuredPort(spec.Name, p, sec); err != nil {
		dev.Close()
		p.closeIdle()
		return err
	}
	added = true
	s.ownerAdded(spec)
	if p.owner != nil {
		p.owner.start()
	}
	slog.Info("port added", "port", spec.Name, "kind", "vhost", "path", spec.Path, "client", spec.Client, "queues", spec.Queues)
	return nil
}

func (p *vhostPort) event(e vhost.Event) {
	switch e.Kind {
	case vhost.EventReady:
		p.state.Store("ready")
	case vhost.EventStopped:
		// A broken device stops its rings too: it stays "broken" (until a
		// front-end sets it up again) so `show ports` says what happened.
		if p.state.Load() != "broken" {
			p.state.Store("stopped")
		}
	case vhost.EventBroken:
		p.state.Store("broken")
	case vhost.EventGone:
		if p.state.Load() != "broken" {
			p.state.Store("waiting")
		}
	case vhost.EventRARP:
		// The guest migrated here and cannot announce itself.
		p.announce(e.MAC)
	}
}

func (p *vhostPort) IngressQueues() []IngressQueue { return asQueues[IngressQueue](p.fromGuest) }
func (p *vhostPort) EgressQueues() []EgressQueue   { return asQueues[EgressQueue](p.toGuest) }

func (p *vhostPort) Info() ctl.PortInfo {
	in := p.dev.Info()
	detail := p.spec.Path + " no guest"
	if in.Connected {
		ring := "split"
		if in.Packed {
			ring = "packed"
		}
		detail = fmt.Sprintf("%s ring=%s mtu=%d", p.spec.Path, ring, in.MTU)
		detail += " " + offloadsDetail(in.Features)
		if in.Logging {
			detail += " migrating"
		}
	}
	if p.spec.Client {
		detail += " client"
	}
	if o := p.spec.Own; o != nil {
		detail += " own=" + o.String() + " own_sockets=" + p.owner.state()
	}
	if in.LastError != nil {
		detail += " last_error=" + in.LastError.Error()
	}
	return ctl.PortInfo{Kind: "vhost", State: p.state.Load().(string), Queues: p.dev.NumQueuePairs(), Detail: detail}
}

func (p *vhostPort) Fail(err error) { p.dev.Break(err) }

func (p *vhostPort) Close() error {
	err := p.dev.Close()
	if p.owner != nil {
		p.owner.close() // after the device: no memory change can start another build
	}
	p.closeIdle()
	return err
}

// closeIdle closes the owner's transmit queues' timers (vmzctx.go), once
// no worker polls them.
func (p *vhostPort) closeIdle() {
	for _, r := range p.fromGuest {
		if r.idle != nil {
			r.idle.close()
			r.idle = nil
		}
	}
}

// Receive takes a burst of the guest's transmitted frames. They stay in
// the guest's buffers until Release (after every destination copied them).
func (r *vhostFromGuest) Receive(b *Burst, c *Counts) (int, error) {
	b.zc = nil
	a := r.q.Hold(b.worker) // kept from burst to burst: see letGo
	if a == nil {
		return 0, nil
	}
	// Recorded before the first touch of guest memory, so that a fault
	// in this very burst can end it (recoverFault).
	r.act = a
	b.zc = r.zc.Load()
	if b.zc != nil {
		// Completions first, at every poll: the guest's chains must not
		// wait for it to send again.
		if err := b.zc.reap(a.Tx); err != nil {
			a.Break(err)
		}
	}
	// Receive's count includes chains virtionet rejected (counted below
	// from LastBurstDrops); the frames to forward are what Frames holds.
	_, err := a.Tx.Receive(MaxBurst)
	countVirtioDrops(c, a.Tx.LastBurstDrops(), true)
	if err != nil {
		a.Break(err)
	}
	frames := a.Tx.Frames()
	n := frames.Len()
	if n == 0 {
		_ = a.Tx.Complete()
		r.act = nil
		b.zc = nil
		return 0, nil
	}
	// The switch reads the frames where virtionet put them, in the TX
	// queue's own table, valid until Release (Complete).
	b.useFrames(frames)
	return n, nil
}

func (r *vhostFromGuest) Release(b *Burst) error {
	b.zc = nil
	a := r.act
	if a == nil {
		return nil
	}
	if err := a.Tx.Complete(); err != nil {
		a.Break(err)
	}
	// Cleared only now: if Complete faults on guest memory, recoverFault
	// still sees the open burst and lets go of the queue.
	r.act = nil
	return nil
}

// letGo releases the guest's TX queue, which Receive holds from one burst
// to the next for its worker (vhost.Queue.Hold): the worker calls it
// before it sleeps and when it stops polling the queue (holder, worker.go).
func (r *vhostFromGuest) letGo(worker int) { r.q.Let(worker) }

func (r *vhostFromGuest) Waker() Waker {
	if t := r.idle; t != nil {
		// An owner's: a sleeping worker wakes every completionPoll while
		// frames wait for completions (vmzctx.go).
		return Waker{FD: t.epfd,
			Arm: func() {
				r.q.Arm()
				if z := r.zc.Load(); z != nil && z.outstanding() {
					t.set(true)
				}
			},
			Disarm: func() { t.set(false); r.q.Disarm() },
			Drain:  func() { t.drain(); r.q.Drain() },
		}
	}
	return Waker{FD: r.q.WaitFD(), Arm: r.q.Arm, Disarm: r.q.Disarm, Drain: r.q.Drain}
}

// running: see liveEgress. A guest enables only the queue pairs it uses.
func (t *vhostToGuest) running() bool { return t.q.Running() }

// Transmit copies the selected frames into the guest's receive buffers.
func (t *vhostToGuest) Transmit(b *Burst, m Mask, c *Counts) {
	a := t.q.Begin()
	if a == nil {
		c.DropN(DropPortDown, m.Count())
		return
	}
	// Deferred, so that a fault on guest memory mid-copy still ends the
	// burst (the worker recovers from it: fault.go). A fault leaves t.act
	// set: Abort keeps the memory named for the worker's recovery, which
	// runs after the lock is let go (vhost/faultowner.go).
	defer t.end()
	t.act = a
	transmitFinishing(&t.fin, b, m, c, a.Rx.Offloads(), t)
	t.act = nil
}

// end ends Transmit's burst: Abort if a fault interrupted it.
func (t *vhostToGuest) end() {
	if t.act != nil {
		t.act = nil
		t.q.Abort()
		return
	}
	t.q.End()
}

// sendAsIs delivers frames the guest takes as they are: plain ones, and
// those whose offload it negotiated, their metadata in the frame's
// virtio-net header (a TSO frame whole, over mergeable buffers).
func (t *vhostToGuest) sendAsIs(b *Burst, m Mask, c *Counts) {
	a := t.act
	frames := b.table()
	if !b.whole(m) {
		// Some of the burst: its frames gathered into a table of the
		// queue's own. A burst to one destination (a cross-connect, a
		// flow, a flood) is delivered from its table as it is.
		frames = &t.frames
		frames.Reset()
		for rest := m; rest != 0; rest &= rest - 1 {
			i := rest.Lowest()
			f := b.Frame(i)
			frames.AddOffload(f.segs, f.len, f.off)
		}
	}
	_, err := a.Rx.Deliver(frames)
	packets, bytes := a.Rx.LastBurstPassed()
	c.Frames(packets, bytes)
	c.Copied(packets, bytes) // Deliver copies every frame
	c.Streamed(uint64(a.Rx.LastBurstStreamed()))
	countVirtioDrops(c, a.Rx.LastBurstDrops(), false)
	if err != nil {
		a.Break(err)
	}
}

// recoverFault: see faultOwner. The queues know the guest memory their
// bursts touch, including a rebind's inside Begin (the first burst over
// a new memory table), which vhost has already undone. A receive burst
// the fault interrupted is ended without completing its chains (the device
// is broken; the next front-end rebuilds its rings).
func (p *vhostPort) recoverFault(addr uintptr, err error, ingress IngressQueue, worker int) bool {
	mine := false
	for _, r := range p.fromGuest {
		mine = mine || r.q.Owns(addr)
	}
	for _, t := range p.toGuest {
		mine = mine || t.q.Owns(addr)
	}
	if !mine {
		return false
	}
	p.dev.Break(err)
	for _, r := range p.fromGuest {
		if IngressQueue(r) == ingress {
			// The faulting worker polls it: it lets go of it.
			r.act = nil
			r.q.Let(worker)
		}
	}
	return true
}
