package vswitch

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"sync/atomic"
	"time"

	"github.com/xvswitch/xvswitch/afpacket"
	"github.com/xvswitch/xvswitch/bpf"
	"github.com/xvswitch/xvswitch/ctl"
	"github.com/xvswitch/xvswitch/guestmem"
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
		pi.VLAN = p.vlan.spec.String()
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
		out = append(out, ctl.FDBRow{MAC: MACString(e.MAC), VLAN: int(e.VLAN), Port: name, Static: e.Static, Age: e.Age})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].MAC != out[j].MAC {
			return out[i].MAC < out[j].MAC
		}
		return out[i].VLAN < out[j].VLAN
	})
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

// StreamWindows is how many measuring windows of the guests' receive
// rings chose ordinary and streaming stores for the frames they may
// stream (guestmem.StreamChoice; docs/metrics.md says what each way
// tells).
func (s *Switch) StreamWindows() (ordinary, streaming uint64) { return guestmem.StreamWindows() }

// DropReasons names every reason a frame can be dropped for, in order.
func (s *Switch) DropReasons() []string { return DropReasons() }

// KernelCounters names, in order, every counter a port's kernel counters
// (ctl.PortCounters.Kernel) may hold: a NIC's XDP verdicts, its sockets'
// AF_XDP statistics and what happened to its interface. The metrics give
// each a series of their own, and their tests check them against this
// list, so it is made by the code that fills the counters in.
func KernelCounters() []string {
	k := map[string]uint64{}
	addKernelCounts(k, bpf.Counters{}, []xsk.Stats{{}}, afpacket.Stats{})
	new(nicEvents).addTo(k)
	k[csumCompletedKey] = 0
	return slices.Sorted(maps.Keys(k))
}

// Workers describes each poll worker, for `show workers`: the queues it
// polls (in the published snapshot) and its time asleep, from the
// timestamps it takes itself when it sleeps and wakes.
func (s *Switch) Workers() []ctl.WorkerInfo {
	snap := s.snap.Load()
	out := make([]ctl.WorkerInfo, len(s.workers))
	for i, w := range s.workers {
		wi := ctl.WorkerInfo{ID: w.id, CPU: w.cpu, Queues: []string{}, Sleeps: w.sleeps.Load(), IdleNs: w.idleNs.Load()}
		// idleNs before asleepAt: a wake-up between the two loads then
		// misses a sleep's time rather than counting it twice.
		at := w.asleepAt.Load()
		now := int64(time.Since(s.start))
		if at > 0 {
			wi.IdleNs += now - at
		}
		if w.running.Load() {
			wi.RunningNs = max(now-w.startedNs.Load(), wi.IdleNs)
		}
		if wi.RunningNs > 0 {
			wi.BusyPercent = 100 * float64(wi.RunningNs-wi.IdleNs) / float64(wi.RunningNs)
		}
		if i < len(snap.polls) {
			for _, in := range snap.polls[i] {
				wi.Queues = append(wi.Queues, fmt.Sprintf("%s/%d", in.port.name, slices.Index(in.port.in, in)))
			}
		}
		out[i] = wi
	}
	return out
}

// ClearStats zeroes the switch's own counters: every queue's packets,
// bytes, drops and flood copies, and each port's refused learning. The
// kernel's counters of a NIC (XDP verdicts, AF_XDP statistics) are not
// the switch's to reset and keep counting since start. A burst being
// counted while it runs may land half before and half after, so the
// balance of the counters holds again once traffic pauses.
func (s *Switch) ClearStats() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range s.ports {
		if p == nil {
			continue
		}
		for i := range p.stats {
			p.stats[i].clear()
		}
		if l := s.fdb.limit(p.idx); l != nil {
			l.refused.Store(0)
		}
	}
}

// clear zeroes the queue's counters.
func (q *QueueStats) clear() {
	for _, c := range []*atomic.Uint64{&q.RxPackets, &q.RxBytes, &q.TxPackets, &q.TxBytes, &q.RxBursts, &q.TxBursts, &q.FloodCopies,
		&q.ZerocopyFrames, &q.CopiedFrames, &q.CopiedBytes, &q.StreamedFrames, &q.SegmentCopies} {
		c.Store(0)
	}
	for d := range q.Drops {
		q.Drops[d].Store(0)
	}
}
