package vswitch

import (
	"fmt"
	"log/slog"
	"math/bits"
	"net"
	"sync/atomic"

	"github.com/xvswitch/xvswitch/guestmem"
	"github.com/xvswitch/xvswitch/vhost"
	"github.com/xvswitch/xvswitch/virtionet"
)

// vhostPort is a vhost-user virtio-net device towards one VM. The device
// outlives its guests: a guest that disconnects, breaks its rings or
// reconnects changes what the queues' Begin returns, never the port.
type vhostPort struct {
	spec  VhostSpec
	dev   *vhost.Device
	rx    []*vhostRx // the guest's TX virtqueues: frames from the VM
	tx    []*vhostTx // the guest's RX virtqueues: frames to the VM
	state atomic.Value
}

// vhostRx receives the frames a guest sends on one TX virtqueue.
type vhostRx struct {
	q   *vhost.Queue
	act *vhost.Active                   // between receive and release
	mem atomic.Pointer[guestmem.Memory] // as vhostTx.mem
}

// vhostTx delivers frames into one of a guest's RX virtqueues.
type vhostTx struct {
	q      *vhost.Queue
	frames virtionet.Frames
	// mem is the guest memory of the last burst, kept to tell whether a
	// memory fault during it was this guest's (fault.go).
	mem atomic.Pointer[guestmem.Memory]
}

// AddVhost adds a vhost-user port.
func (s *Switch) AddVhost(spec VhostSpec) error {
	if s.hasPort(spec.Name) {
		return fmt.Errorf("port %q exists", spec.Name)
	}
	p := &vhostPort{spec: spec}
	p.state.Store("waiting")
	var mac net.HardwareAddr
	var key uint64
	if spec.MAC != "" {
		var err error
		if mac, err = net.ParseMAC(spec.MAC); err != nil {
			return err
		}
		key = MACKey(mac)
	}
	dev, err := vhost.Open(vhost.Config{
		Name:       spec.Name,
		Path:       spec.Path,
		Client:     spec.Client,
		QueuePairs: spec.Queues,
		MAC:        mac,
		SocketMode: spec.Mode,
		SocketGID:  spec.GID,
		OnEvent:    p.event,
	})
	if err != nil {
		return err
	}
	p.dev = dev
	for i := 0; i < dev.NumQueuePairs(); i++ {
		p.rx = append(p.rx, &vhostRx{q: dev.TxQueue(i)})
		p.tx = append(p.tx, &vhostTx{q: dev.RxQueue(i)})
	}
	if _, err := s.addPort(spec.Name, p, key); err != nil {
		dev.Close()
		return err
	}
	slog.Info("port added", "name", spec.Name, "kind", "vhost", "path", spec.Path, "client", spec.Client, "queues", spec.Queues)
	return nil
}

func (p *vhostPort) event(e vhost.Event) {
	switch e.Kind {
	case vhost.EventReady:
		p.state.Store("ready")
	case vhost.EventStopped:
		p.state.Store("stopped")
	case vhost.EventBroken:
		p.state.Store("broken")
		slog.Warn("vhost port broken", "port", p.spec.Name, "err", e.Err)
	case vhost.EventGone:
		if p.state.Load() != "broken" {
			p.state.Store("waiting")
		}
	case vhost.EventRARP:
		// A migrated guest asks for a RARP to announce its MAC; learning
		// from the guest's next frame does the same for this switch.
		slog.Info("vhost port: guest announced its MAC", "port", p.spec.Name, "mac", e.MAC)
	}
	slog.Debug("vhost event", "port", p.spec.Name, "event", e.String())
}

func (p *vhostPort) rxQueues() []rxQueue { return asQueues[rxQueue](p.rx) }
func (p *vhostPort) txQueues() []txQueue { return asQueues[txQueue](p.tx) }

func (p *vhostPort) info() PortInfo {
	in := p.dev.Info()
	detail := p.spec.Path + " no guest"
	if in.Connected {
		ring := "split"
		if in.Packed {
			ring = "packed"
		}
		detail = fmt.Sprintf("%s ring=%s mtu=%d", p.spec.Path, ring, in.MTU)
	}
	if p.spec.Client {
		detail += " client"
	}
	if in.LastError != nil {
		detail += " last_error=" + in.LastError.Error()
	}
	return PortInfo{Kind: "vhost", State: p.state.Load().(string), Queues: p.dev.NumQueuePairs(), Detail: detail}
}

func (p *vhostPort) fail(err error) { p.dev.Break(err) }

func (p *vhostPort) close() error { return p.dev.Close() }

// receive takes a burst of the guest's transmitted frames. They stay in
// the guest's buffers until release (after every destination copied them).
func (r *vhostRx) receive(fb *frameBurst, c *burstCounts) (int, error) {
	a := r.q.Begin()
	if a == nil {
		return 0, nil
	}
	// Receive's count includes chains virtionet rejected (counted below
	// from LastBurst); the frames to forward are what Frames holds.
	_, err := a.Tx.Receive(MaxBurst)
	last := a.Tx.LastBurst()
	countVirtioDrops(c, &last, true)
	if err != nil {
		a.Break(err)
	}
	if r.mem.Load() != a.Mem {
		r.mem.Store(a.Mem)
	}
	frames := a.Tx.Frames()
	n := frames.Len()
	if n == 0 {
		_ = a.Tx.Complete()
		r.q.End()
		return 0, nil
	}
	for i := 0; i < n; i++ {
		fb.f[i] = frame{segs: frames.Segments(i), len: frames.FrameLen(i)}
	}
	r.act = a
	return n, nil
}

func (r *vhostRx) release(fb *frameBurst) error {
	a := r.act
	if a == nil {
		return nil
	}
	r.act = nil
	if err := a.Tx.Complete(); err != nil {
		a.Break(err)
	}
	r.q.End()
	return nil
}

func (r *vhostRx) waker() waker {
	return waker{fd: r.q.WaitFD(), arm: r.q.Arm, disarm: r.q.Disarm, drain: r.q.Drain}
}

// transmit copies the selected frames into the guest's receive buffers.
func (t *vhostTx) transmit(fb *frameBurst, mask frameMask, c *burstCounts) {
	a := t.q.Begin()
	if a == nil {
		c.dropN(DropPortDown, bits.OnesCount32(uint32(mask)))
		return
	}
	// Deferred, so that a fault on guest memory mid-copy still ends the
	// burst (the worker recovers from it: fault.go).
	defer t.q.End()
	if t.mem.Load() != a.Mem {
		t.mem.Store(a.Mem)
	}
	t.frames.Reset()
	for m := mask; m != 0; m &= m - 1 {
		f := &fb.f[bits.TrailingZeros32(uint32(m))]
		t.frames.AddSized(f.segs, f.len)
	}
	_, err := a.Rx.Deliver(&t.frames)
	last := a.Rx.LastBurst()
	c.packets += last.Packets
	c.bytes += last.Bytes
	countVirtioDrops(c, &last, false)
	if err != nil {
		a.Break(err)
	}
}

// countVirtioDrops adds a virtio-net queue's burst drops to c. On the
// receive side a dropped frame was also received, so it counts as a
// packet too (received = forwarded + dropped).
func countVirtioDrops(c *burstCounts, s *virtionet.Stats, received bool) {
	for r := virtionet.DropReason(0); r < virtionet.NumDropReasons; r++ {
		n := int(s.Drops[r])
		if n == 0 {
			continue
		}
		if received {
			c.packets += uint64(n)
		}
		c.dropN(virtioDrop[r], n)
	}
}

var virtioDrop = [virtionet.NumDropReasons]Drop{
	virtionet.DropNoRxBuffers:         DropNoRxBuffers,
	virtionet.DropTooLong:             DropTooLong,
	virtionet.DropMalformed:           DropMalformed,
	virtionet.DropGuestBufferTooSmall: DropBufferSmall,
	virtionet.DropRingBroken:          DropRingBroken,
	virtionet.DropQueueStopped:        DropPortDown,
}

// recoverFault: see faultOwner. A receive burst the fault interrupted is
// ended without completing its chains (the device is broken; the next
// front-end rebuilds its rings).
func (p *vhostPort) recoverFault(addr uintptr, err error, ingress rxQueue) bool {
	mine := false
	for _, r := range p.rx {
		if m := r.mem.Load(); m != nil && m.ContainsHost(addr) {
			mine = true
		}
	}
	for _, t := range p.tx {
		if m := t.mem.Load(); m != nil && m.ContainsHost(addr) {
			mine = true
		}
	}
	if !mine {
		return false
	}
	p.dev.Break(err)
	for _, r := range p.rx {
		if rxQueue(r) == ingress && r.act != nil {
			r.act = nil
			r.q.End()
		}
	}
	return true
}
