package vswitch

import (
	"maps"
	"slices"
	"sort"

	"github.com/xvswitch/xvswitch/bpf"
	"github.com/xvswitch/xvswitch/ctl"
	"github.com/xvswitch/xvswitch/xsk"
)

// What `xvswitch show` and the metrics endpoint read of a running switch.
// Everything here takes the control plane's lock, never a worker's.

// Ports lists the ports, for `show ports`.
func (s *Switch) Ports() []ctl.PortInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []ctl.PortInfo
	for _, p := range s.ports {
		if p == nil {
			continue
		}
		pi := p.drv.Info()
		pi.Name = p.name
		if peer := int(p.peer.Load()) - 1; peer >= 0 && peer < len(s.ports) && s.ports[peer] != nil {
			pi.Peer = s.ports[peer].name
		}
		out = append(out, pi)
	}
	return out
}

// FDB lists the forwarding database with port names, for `show fdb`.
func (s *Switch) FDB() []ctl.FDBRow {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []ctl.FDBRow
	for _, e := range s.fdb.Entries() {
		name := "?"
		if e.Port >= 0 && e.Port < len(s.ports) && s.ports[e.Port] != nil {
			name = s.ports[e.Port].name
		}
		out = append(out, ctl.FDBRow{MAC: MACString(e.MAC), Port: name, Static: e.Static, Age: e.Age})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].MAC < out[j].MAC })
	return out
}

// Stats returns every port's counters, for `show stats`.
func (s *Switch) Stats() []ctl.PortCounters {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []ctl.PortCounters
	for _, p := range s.ports {
		if p != nil {
			pc := p.counters()
			pc.LearnRefused = s.fdb.LearnRefused(p.idx)
			out = append(out, pc)
		}
	}
	return out
}

// FDBLen is how many MACs the forwarding database holds.
func (s *Switch) FDBLen() int { return s.fdb.Len() }

// WorkerSleeps is, per poll worker, how many times it went idle and slept
// in epoll.
func (s *Switch) WorkerSleeps() []uint64 {
	out := make([]uint64, len(s.workers))
	for i, w := range s.workers {
		out[i] = w.sleeps.Load()
	}
	return out
}

// DropReasons names every reason a frame can be dropped for, in order.
func (s *Switch) DropReasons() []string { return DropReasons() }

// KernelCounters names, in order, every counter a port's kernel counters
// (ctl.PortCounters.Kernel) may hold: a NIC's XDP verdicts, its sockets'
// AF_XDP statistics and what happened to its interface. The metrics give
// each a series of their own, and their tests check them against this
// list, so it is made by the code that fills the counters in.
func KernelCounters() []string {
	k := map[string]uint64{}
	addKernelCounts(k, bpf.Counters{}, []xsk.Stats{{}})
	new(nicEvents).addTo(k)
	k[csumCompletedKey] = 0
	return slices.Sorted(maps.Keys(k))
}
