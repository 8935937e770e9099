package vswitch

import "sync/atomic"

// portDriver is what a kind of port (AF_XDP NIC, vhost-user device) gives
// the switch. Its queues are created once; a vhost device whose guest
// comes and goes keeps its queues and reports the guest's absence by
// dropping frames as "port_down".
type portDriver interface {
	rxQueues() []rxQueue
	txQueues() []txQueue
	// info fills the kind, state and detail columns of `show ports`.
	info() PortInfo
	// fail is told that a queue of the port broke (a guest broke its
	// ring): the driver marks its device broken, says why in the log, and
	// its queues report nothing until a guest sets it up again.
	fail(err error)
	// close stops the port and releases what it holds. Workers no longer
	// touch its queues when it is called.
	close() error
}

// kernelCounter is implemented by ports whose kernel side keeps counters
// of its own (see PortCounters.Kernel).
type kernelCounter interface {
	kernelCounters() map[string]uint64
}

// macSteerer is implemented by ports whose XDP program must be told the
// MACs the switch owns (the VMs' MACs), so the host keeps the rest.
type macSteerer interface {
	setMACs(macs []uint64) error
}

// port is a switch port: a driver, its queues, its counters.
type port struct {
	idx   int
	name  string
	drv   portDriver
	stats []QueueStats // per queue index; rx and tx of queue i share stats[i]
	rx    []*rxBinding
	tx    []*txBinding
	// peer is the cross-connect partner's index + 1 (0: the port is on
	// the learning bridge).
	peer atomic.Int32
	// mac is a MAC configured for the port (a VM's), 0 if none.
	mac uint64
}

func newPort(idx int, name string, drv portDriver) *port {
	p := &port{idx: idx, name: name, drv: drv}
	rq, tq := drv.rxQueues(), drv.txQueues()
	n := max(len(rq), len(tq))
	p.stats = make([]QueueStats, n)
	for i, q := range rq {
		p.rx = append(p.rx, &rxBinding{port: p, q: q, stats: &p.stats[i]})
	}
	for i, q := range tq {
		p.tx = append(p.tx, &txBinding{q: q, stats: &p.stats[i]})
	}
	return p
}

func (p *port) counters() PortCounters {
	qs := make([]QueueCounters, len(p.stats))
	for i := range p.stats {
		qs[i] = p.stats[i].Snapshot(i)
	}
	pc := SumQueues(p.name, qs)
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
