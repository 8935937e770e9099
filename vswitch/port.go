package vswitch

import (
	"sync"
	"sync/atomic"

	"github.com/xvswitch/xvswitch/ctl"
	"github.com/xvswitch/xvswitch/portspec"
)

// port is a switch port: a driver, its queues, its counters.
type port struct {
	idx   int
	name  string
	drv   PortDriver
	stats []QueueStats // per queue index; ingress and egress of queue i share stats[i]
	in    []*ingress
	out   []*egress
	// outBy is each worker's share of out (egress.go), by worker id.
	outBy [][]*egress
	// peer is the cross-connect partner's index + 1 (0: the port is on
	// the learning bridge).
	peer atomic.Int32
	// mac is a MAC configured for the port (a VM's), 0 if none.
	mac uint64
	// srcCheck selects the bits of a frame's source MAC that must equal
	// mac: all of them when the port may send only from it, else none
	// (security.srcCheck).
	srcCheck uint64
	// vlan is the port's VLAN settings (vlan.go); never nil: a port
	// without settings carries every VLAN.
	vlan *portVLAN
}

// ingress is a polled queue with its counters.
type ingress struct {
	port  *port
	q     IngressQueue
	stats *QueueStats
}

// egress is a transmit queue with its lock and counters.
type egress struct {
	mu    sync.Mutex
	q     EgressQueue
	stats *QueueStats
}

func newPort(idx int, name string, drv PortDriver) *port {
	p := &port{idx: idx, name: name, drv: drv, vlan: newPortVLAN(portspec.VLANs{})}
	iq, eq := drv.IngressQueues(), drv.EgressQueues()
	p.stats = make([]QueueStats, max(len(iq), len(eq)))
	for i, q := range iq {
		p.in = append(p.in, &ingress{port: p, q: q, stats: &p.stats[i]})
	}
	for i, q := range eq {
		p.out = append(p.out, &egress{q: q, stats: &p.stats[i]})
	}
	return p
}

func (p *port) counters() ctl.PortCounters {
	qs := make([]ctl.QueueCounters, len(p.stats))
	for i := range p.stats {
		qs[i] = p.stats[i].snapshot(i)
	}
	pc := ctl.SumQueues(p.name, qs)
	if k, ok := p.drv.(kernelCounter); ok {
		pc.Kernel = k.kernelCounters()
	}
	return pc
}

// asQueues converts a driver's queue slice to the interface the switch
// polls or transmits on.
func asQueues[I any, T any](qs []T) []I {
	out := make([]I, len(qs))
	for i, q := range qs {
		out[i] = any(q).(I)
	}
	return out
}
