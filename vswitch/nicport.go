package vswitch

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"sync"

	"github.com/xvswitch/xvswitch/bpf"
	"github.com/xvswitch/xvswitch/ctl"
	"github.com/xvswitch/xvswitch/portspec"
	"github.com/xvswitch/xvswitch/xsk"
)

// nicPort is an AF_XDP port: the steering program on the interface, one
// UMEM shared by one socket per queue.
type nicPort struct {
	spec   portspec.NIC
	steer  *bpf.Steering
	umem   *xsk.UMEM
	queues []*nicQueue
	maxLen int // longest frame the NIC sends: MTU + Ethernet header + VLAN tag

	macMu sync.Mutex
	macs  map[uint64]bool // what the XDP MAC map holds
}

// nicQueue is one socket. Its frame stash is shared by the receive side
// (the worker polling it returns frames) and the transmit side (any worker
// takes frames to send), so both take mu, once per burst.
type nicQueue struct {
	mu     sync.Mutex
	sock   *xsk.Socket
	descs  [MaxBurst]xsk.Desc // a switch burst of RX descriptors
	n      int
	maxLen int
}

// nicQueueCount is how many rx queues the interface has.
func nicQueueCount(ifname string) int {
	m, _ := filepath.Glob(filepath.Join("/sys/class/net", ifname, "queues", "rx-*"))
	if len(m) == 0 {
		return 1
	}
	return len(m)
}

// AddNIC adds an AF_XDP port on a NIC.
func (s *Switch) AddNIC(spec portspec.NIC) error {
	if s.hasPort(spec.Name) {
		return fmt.Errorf("%w: %q", ErrPortExists, spec.Name)
	}
	drv, err := newNICPort(spec)
	if err != nil {
		return err
	}
	if _, err := s.addSecuredPort(spec.Name, drv, security{maxMACs: orDefault(spec.MaxMACs, DefaultNICMaxMACs)}); err != nil {
		drv.Close()
		return err
	}
	slog.Info("port added", "port", spec.Name, "kind", "nic", "detail", drv.Info().Detail)
	return nil
}

func newNICPort(spec portspec.NIC) (*nicPort, error) {
	ifi, err := net.InterfaceByName(spec.Ifname)
	if err != nil {
		return nil, fmt.Errorf("vswitch: nic %s: %w", spec.Ifname, err)
	}
	nq := spec.Queues
	if nq == 0 {
		nq = nicQueueCount(spec.Ifname)
	}
	p := &nicPort{spec: spec, maxLen: ifi.MTU + 14 + 4, macs: map[uint64]bool{}}
	// The switch takes frames for the MACs behind its other ports, and
	// broadcast and multicast (the VMs need ARP and neighbour discovery);
	// the host keeps its unicast.
	p.steer, err = bpf.Attach(spec.Ifname, bpf.Options{Policy: bpf.Policy{Mode: bpf.ModeMAC, Broadcast: true, Multicast: true}})
	if err != nil {
		return nil, err
	}
	// Broadcast ARP and IPv6 neighbour solicitations for the host's own
	// addresses go to the host, not the switch: without this a peer could
	// not resolve the host's address on the NIC.
	if err := p.steer.TrackHostAddrs(context.Background()); err != nil {
		p.steer.Close()
		return nil, fmt.Errorf("vswitch: nic %s: tracking the host's addresses: %w", spec.Ifname, err)
	}
	mode := xsk.ModeAuto
	switch spec.Mode {
	case portspec.ModeCopy:
		mode = xsk.ModeCopy
	case portspec.ModeZeroCopy:
		mode = xsk.ModeZeroCopy
	}
	const perQueue = 3 * 1024 // 2 x fill ring + TX ring, the xsk defaults
	p.umem, err = xsk.NewUMEM(xsk.UMEMConfig{FrameSize: 4096, NumFrames: uint32(perQueue * nq)})
	if err != nil {
		p.steer.Close()
		return nil, err
	}
	for q := 0; q < nq; q++ {
		s, err := p.umem.Bind(ifi.Index, q, xsk.SocketConfig{Mode: mode})
		if err != nil {
			p.Close()
			return nil, fmt.Errorf("vswitch: nic %s queue %d: %w", spec.Ifname, q, err)
		}
		p.queues = append(p.queues, &nicQueue{sock: s, maxLen: p.maxLen})
		if err := p.steer.SetSocket(uint32(q), s.FD()); err != nil {
			p.Close()
			return nil, err
		}
	}
	return p, nil
}

func (p *nicPort) IngressQueues() []IngressQueue { return asQueues[IngressQueue](p.queues) }
func (p *nicPort) EgressQueues() []EgressQueue   { return asQueues[EgressQueue](p.queues) }

func (p *nicPort) Info() ctl.PortInfo {
	mode := "copy"
	if len(p.queues) > 0 && p.queues[0].sock.ZeroCopy() {
		mode = "zerocopy"
	}
	xdp := "native"
	if p.steer.XDPMode() == bpf.XDPGeneric {
		xdp = "generic"
	}
	return ctl.PortInfo{Kind: "nic", State: "up", Queues: len(p.queues),
		Detail: fmt.Sprintf("%s xdp=%s af_xdp=%s pins=%s", p.spec.Ifname, xdp, mode, p.steer.PinDir())}
}

// Fail: a NIC queue does not break the way a guest's ring does.
func (p *nicPort) Fail(err error) {}

func (p *nicPort) Close() error {
	var first error
	if p.steer != nil {
		for q := range p.queues {
			_ = p.steer.RemoveSocket(uint32(q))
		}
		first = p.steer.Close()
	}
	if p.umem != nil {
		if err := p.umem.Close(); first == nil {
			first = err
		}
	}
	return first
}

// setMACs makes the XDP MAC map hold exactly macs.
func (p *nicPort) setMACs(macs []uint64) error {
	p.macMu.Lock()
	defer p.macMu.Unlock()
	want := make(map[uint64]bool, len(macs))
	for _, m := range macs {
		want[m] = true
	}
	var first error
	for m := range want {
		if !p.macs[m] {
			if err := p.steer.AddMAC(macBytes(m), 0); err != nil {
				first = err
				continue
			}
			p.macs[m] = true
		}
	}
	for m := range p.macs {
		if !want[m] {
			if err := p.steer.RemoveMAC(macBytes(m)); err != nil && first == nil {
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

func (q *nicQueue) Receive(b *Burst, _ *Counts) (int, error) {
	q.mu.Lock()
	n := q.sock.Receive(q.descs[:])
	q.mu.Unlock()
	for i := 0; i < n; i++ {
		b.SetOne(i, q.sock.Frame(q.descs[i]))
	}
	q.n = n
	return n, nil
}

func (q *nicQueue) Release(*Burst) error {
	q.mu.Lock()
	q.sock.Release(q.descs[:q.n])
	q.mu.Unlock()
	q.n = 0
	return nil
}

func (q *nicQueue) Waker() Waker {
	// The socket's fd polls readable when its RX ring has frames.
	return Waker{FD: q.sock.FD()}
}

// Transmit copies the selected frames into UMEM frames and sends them with
// one kick.
func (q *nicQueue) Transmit(b *Burst, mask Mask, c *Counts) {
	q.mu.Lock()
	defer q.mu.Unlock()
	_, _ = q.sock.Complete()
	want := mask.Count()
	got := q.sock.TXReserve(want)
	slot := 0
	for m := mask; m != 0; m &= m - 1 {
		f := b.Frame(m.Lowest())
		if f.len > q.maxLen {
			c.Drop(DropTooLong)
			continue
		}
		if slot >= got {
			c.Drop(DropTxFull)
			continue
		}
		buf := q.sock.TXBuffer(slot)
		if len(buf) < f.len {
			c.Drop(DropTooLong)
			continue
		}
		f.CopyTo(buf)
		q.sock.TXSetLen(slot, f.len)
		slot++
		c.Frame(f.len)
	}
	// A failed kick leaves the frames in the TX ring; the next burst's
	// Complete kicks again, and xsk counts the failure (Counters.KickErrors).
	_, _ = q.sock.TXSubmit(slot)
}

// kernelCounters reads the XDP program's verdicts and the sockets' kernel
// statistics (safe beside the workers: both are syscalls the kernel
// serialises).
func (p *nicPort) kernelCounters() map[string]uint64 {
	k := map[string]uint64{}
	if c, err := p.steer.Counters(); err == nil {
		k["xdp_redirected"] = c.Redirected
		k["xdp_no_socket_passed"] = c.NoSocketPassed
		k["xdp_not_owned_passed"] = c.NotOwnedPassed
		k["xdp_host_arp_passed"] = c.HostARPPassed
		k["xdp_host_nd_passed"] = c.HostNDPassed
		k["xdp_short_passed"] = c.ShortPassed
	}
	for _, q := range p.queues {
		s, err := q.sock.Stats()
		if err != nil {
			continue
		}
		k["af_xdp_rx_dropped"] += s.RXDropped
		k["af_xdp_rx_ring_full"] += s.RXRingFull
		k["af_xdp_rx_fill_ring_empty"] += s.RXFillRingEmptyDescs
		k["af_xdp_rx_invalid_descs"] += s.RXInvalidDescs
		k["af_xdp_tx_invalid_descs"] += s.TXInvalidDescs
	}
	return k
}
