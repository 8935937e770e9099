package vswitch

import (
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/xvswitch/xvswitch/bpf"
	"github.com/xvswitch/xvswitch/ctl"
	"github.com/xvswitch/xvswitch/portspec"
)

// nicPort is an AF_XDP port: the steering program on the interface, one
// UMEM shared by one socket per queue. The port is its interface's name:
// its queues, counters and place on the switch stay while the interface
// goes down, is deleted and comes back, or loses its XDP program; a
// watcher (nicwatch.go) follows the interface and recovers what it can
// (docs/nic-faults.md).
type nicPort struct {
	spec   portspec.NIC
	queues []*nicQueue
	// groups is one more ingress queue, after the AF_XDP ones: the group
	// frames the host's kernel gets, copied to the switch (nicgroups.go).
	groups *nicGroupQueue
	link   nicLink

	// bound is the interface the port is attached to, nil while it is
	// gone. The watcher replaces it with the switch's lock held, after
	// the workers stopped using its sockets; other readers hold that lock.
	bound *nicBinding
	// retired sums the kernel counters of the bindings the port had
	// before, so its counters keep counting up across re-attachments.
	retired map[string]uint64
	// ownerSocks: the statistics of VM owners' sockets on its queues.
	ownerSocks ownerSocketStats
	// foreign is the id of another XDP program found on the hook (0:
	// none): the port is degraded.
	foreign atomic.Uint32
	events  nicEvents
	watch   *nicWatch
	// The watcher's own: what it last could not do and why (logged once),
	// and whether the port's program was missing from the hook at its
	// last look.
	lastWait string
	xdpLost  bool
	// csumWhy is the checksum policy last logged (install logs it when
	// an interface brings a new one).
	csumWhy string

	macMu sync.Mutex
	macs  map[uint64]bool // what the XDP MAC map holds

	// owners says which of the interface's queues VMs own (owned.go):
	// the port binds no socket there.
	owners *queueOwners
}

// AddNIC adds an AF_XDP port on a NIC.
func (s *Switch) AddNIC(spec portspec.NIC) error {
	if s.hasPort(spec.Name) {
		return fmt.Errorf("%w: %q", ErrPortExists, spec.Name)
	}
	drv, err := newNICPort(spec, &s.owners)
	if err != nil {
		return err
	}
	// The host's own MAC on the NIC is a static entry of its port: a
	// guest sending from it cannot have it learned behind itself, which
	// would make the NIC's program steer the host's unicast into the
	// switch. (No source check: a NIC forwards a whole network's MACs.)
	sec := security{mac: drv.bound.hostMAC, maxMACs: orDefault(spec.MaxMACs, DefaultNICMaxMACs), vlans: spec.VLANs}
	if _, err := s.addSecuredPort(spec.Name, drv, sec); err != nil {
		drv.Close()
		return err
	}
	// Under the lock DelPort closes ports with: a port deleted already is
	// not watched.
	s.mu.Lock()
	defer s.mu.Unlock()
	if p := s.byName[spec.Name]; p != nil && p.drv == PortDriver(drv) {
		// VMs that own queues of the interface bind their sockets into
		// this port's slots and queues.
		s.renewOwners(spec.Ifname)
		drv.watch = startNICWatch(drv, s)
		slog.Info("port added", "port", spec.Name, "kind", "nic", "detail", drv.detail())
	}
	return nil
}

// newNICPort attaches to the interface.
func newNICPort(spec portspec.NIC, owners *queueOwners) (*nicPort, error) {
	nq := spec.Queues
	if nq == 0 {
		nq = nicQueueCount(spec.Ifname)
	}
	p := &nicPort{spec: spec, retired: map[string]uint64{}, macs: map[uint64]bool{}, owners: owners}
	for range nq {
		q, err := newNICQueue(&p.link)
		if err != nil {
			p.Close()
			return nil, err
		}
		p.queues = append(p.queues, q)
	}
	var err error
	if p.groups, err = newNICGroupQueue(&p.link); err != nil {
		p.Close()
		return nil, err
	}
	b, err := bindNIC(spec, nq, p.owned)
	if err != nil {
		p.Close()
		return nil, err
	}
	p.install(b)
	return p, nil
}

// install makes b the port's interface: its queues take b's sockets.
func (p *nicPort) install(b *nicBinding) {
	p.bound = b
	p.link.mtu.Store(int32(b.mtu))
	p.link.up.Store(b.up)
	p.link.fixCsum.Store(b.fixCsum)
	if b.csumWhy != p.csumWhy {
		p.csumWhy = b.csumWhy
		slog.Info("nic checksums", "port", p.spec.Name, "ifname", p.spec.Ifname, "complete_tcp_udp", b.fixCsum, "why", b.csumWhy)
	}
	p.syncQueueOwners(b)
	p.attachSockets(b)
	p.groups.attach(b.groups)
	p.macMu.Lock()
	p.macs = map[uint64]bool{} // a new program's MAC map is empty
	p.macMu.Unlock()
}

// IngressQueues: the AF_XDP queues, then the group frames' queue (so the
// port's stats have one row more than it has rx queues, the last one
// receive-only).
func (p *nicPort) IngressQueues() []IngressQueue {
	return append(asQueues[IngressQueue](p.queues), p.groups)
}

func (p *nicPort) EgressQueues() []EgressQueue { return asQueues[EgressQueue](p.queues) }

// Info: the state is "gone" (no interface of that name), "down" (no link),
// "degraded" (another XDP program holds the hook) or "up".
func (p *nicPort) Info() ctl.PortInfo {
	state := "up"
	switch {
	case p.bound == nil:
		state = "gone"
	case !p.link.up.Load():
		state = "down"
	case p.foreign.Load() != 0:
		state = "degraded"
	}
	return ctl.PortInfo{Kind: "nic", State: state, Queues: len(p.queues), Detail: p.detail()}
}

func (p *nicPort) detail() string {
	b := p.bound
	if b == nil {
		return p.spec.Ifname + " gone: waiting for an interface of that name"
	}
	mode := b.mode()
	xdp := "native"
	if b.steer.XDPMode() == bpf.XDPGeneric {
		xdp = "generic"
	}
	if id := p.foreign.Load(); id != 0 {
		xdp = fmt.Sprintf("other(prog %d)", id)
	}
	csum := "off"
	if p.link.fixCsum.Load() {
		csum = "fix"
	}
	d := fmt.Sprintf("%s xdp=%s af_xdp=%s mtu=%d csum=%s pins=%s", p.spec.Ifname, xdp, mode, p.link.mtu.Load(), csum, b.steer.PinDir())
	if o := p.owners.describe(p.spec.Ifname); o != "" {
		d += " owned=" + strings.ReplaceAll(o, " ", ",")
	}
	return d
}

// Fail: a NIC queue does not break the way a guest's ring does.
func (p *nicPort) Fail(err error) {}

// Close stops the watcher and releases the interface. Workers no longer
// touch the queues when it is called.
func (p *nicPort) Close() error {
	p.watch.stop()
	var err error
	if b := p.bound; b != nil {
		p.detachSockets(b)
		p.groups.detach(b.groups)
		err = b.close()
		p.bound = nil
	}
	for _, q := range p.queues {
		q.close()
	}
	if p.groups != nil {
		p.groups.close()
	}
	return err
}

// setMACs makes the XDP MAC map hold exactly macs, FDB keys (FDBKey: a
// MAC in a VLAN); nothing while the interface is gone: the next program
// starts empty and gets them all.
func (p *nicPort) setMACs(macs []uint64) error {
	p.macMu.Lock()
	defer p.macMu.Unlock()
	if p.bound == nil {
		return nil
	}
	steer := p.bound.steer
	want := make(map[uint64]bool, len(macs))
	for _, m := range macs {
		want[m] = true
	}
	var first error
	for m := range want {
		if !p.macs[m] {
			if err := steer.AddVLANMAC(macBytes(m), uint16(m>>vlanShift), 0); err != nil {
				first = err
				continue
			}
			p.macs[m] = true
		}
	}
	for m := range p.macs {
		if !want[m] {
			if err := steer.RemoveVLANMAC(macBytes(m), uint16(m>>vlanShift)); err != nil && first == nil {
				first = err
			}
			delete(p.macs, m)
		}
	}
	return first
}

func macBytes(k uint64) net.HardwareAddr {
	return net.HardwareAddr{byte(k >> 40), byte(k >> 32), byte(k >> 24), byte(k >> 16), byte(k >> 8), byte(k)}
}

// csumCompletedKey counts the received frames whose TCP or UDP checksum
// the port completed (csum.go).
const csumCompletedKey = "csum_completed"

// kernelCounters: the XDP program's verdicts and the sockets' kernel
// statistics, over every interface the port was bound to, and what
// happened to the interface (nicEvents).
func (p *nicPort) kernelCounters() map[string]uint64 {
	k := make(map[string]uint64, len(p.retired)+nicEventCount)
	for name, n := range p.retired {
		k[name] = n
	}
	if p.bound != nil {
		p.bound.counters(k)
	}
	p.ownerSocks.addTo(k)
	p.events.addTo(k)
	k[csumCompletedKey] = p.link.csumCompleted.Load()
	return k
}
