package vswitch

// snapshot is what workers forward with: the port table and which queues
// each worker polls. It is immutable; the control plane publishes a new one
// behind an atomic pointer and waits until every worker has picked it up
// (worker.seen) before it closes a removed port, so no worker ever touches
// a closed port's queues or a guest's unmapped memory.
type snapshot struct {
	gen   uint64
	ports []*port      // by port index; nil where a port was deleted
	polls [][]*ingress // per worker
	// solo is the one worker that may transmit, if every other polls
	// nothing (-1: several may): it alone takes no egress lock
	// (egress.go). With one worker it is always 0.
	solo int
	// vlans: some port has VLAN settings, so the forwarder classifies
	// frames by VLAN (vlan.go); false, it switches everything in VLAN 0.
	vlans bool
}

// soloWorker is the worker that alone polls anything (or 0 when none
// does: then nobody transmits), or -1 when several do.
func soloWorker(polls [][]*ingress) int {
	solo := -1
	for w, ps := range polls {
		if len(ps) == 0 {
			continue
		}
		if solo >= 0 {
			return -1
		}
		solo = w
	}
	return max(solo, 0)
}

// withSolo is a copy of s with another generation and solo worker.
func (s *snapshot) withSolo(gen uint64, solo int) *snapshot {
	c := *s
	c.gen, c.solo = gen, solo
	return &c
}

// buildSnapshot spreads every port's receive queues over the workers,
// round robin in port and queue order, so a multi-queue port's queues land
// on different workers; worker 0 polls extra as well (announce.go).
func buildSnapshot(gen uint64, ports []*port, workers int, extra []*ingress) *snapshot {
	s := &snapshot{gen: gen, ports: ports, polls: make([][]*ingress, workers)}
	i := 0
	for _, p := range ports {
		if p == nil {
			continue
		}
		s.vlans = s.vlans || p.vlan.spec.IsSet()
		for _, in := range p.in {
			s.polls[i%workers] = append(s.polls[i%workers], in)
			i++
		}
	}
	s.polls[0] = append(s.polls[0], extra...)
	s.solo = soloWorker(s.polls)
	return s
}
