package main

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/xvswitch/xvswitch/test/testpmd"
)

// This file reads each switch's drop counters at the start and at the end
// of the measured window, so that frames lost while the traffic ramped up
// (rings filling, a guest not yet polling) do not count: the table shows
// what was dropped in the window only. Both systems are read the same way,
// from their own counters: xvswitch's show stats (its drop reasons and the
// kernel's AF_XDP drops of its NIC port), DPDK testpmd's port statistics
// (RX-missed, RX-errors, RX-nombuf, TX-errors) and its forwarding engine's
// TX-dropped (show fwd stats all): the frames a port's transmit refused,
// such as a full guest RX ring's, which DPDK 22.11's vhost PMD leaves out
// of its port statistics.

// Drops are cumulative drop counters, keyed "port:reason".
type Drops map[string]uint64

// since is the drops between before and d: each counter's increase. A
// counter lower than before was reset (a port re-created) and counts from
// zero. Counters that did not move are left out.
func (d Drops) since(before Drops) Drops {
	out := Drops{}
	for k, v := range d {
		b := before[k]
		if v < b {
			b = 0
		}
		if v > b {
			out[k] = v - b
		}
	}
	return out
}

// total sums the counters, leaving out those whose reason (after the
// port) is one of skip: a case's by-design drop, uncomparable counters.
func (d Drops) total(skip ...string) uint64 {
	var n uint64
next:
	for k, v := range d {
		for _, s := range skip {
			if s != "" && strings.HasSuffix(k, ":"+s) {
				continue next
			}
		}
		n += v
	}
	return n
}

// ringFullDrop is the kernel's count of frames an AF_XDP socket's full RX
// ring refused. DPDK's af_xdp PMD leaves it out of its port statistics
// (RX-missed is the socket's rx_dropped), so window totals leave it out of
// xvswitch's too, to count both the same way; it stays in window_drops.
const ringFullDrop = "kernel.af_xdp_rx_ring_full"

// String lists the counters in key order: "vu0:no_rx_buffers=12 ...".
func (d Drops) String() string {
	keys := make([]string, 0, len(d))
	for k := range d {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%d", k, d[k])
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, " ")
}

// kernelDrops are the kernel's counters of a NIC port (ctl.PortCounters.
// Kernel) that count lost frames: frames the socket's rings could not
// take (see ringFullDrop) or invalid descriptors.
var kernelDrops = []string{"af_xdp_rx_dropped", "af_xdp_rx_ring_full", "af_xdp_rx_invalid_descs", "af_xdp_tx_invalid_descs"}

// drops reads xvswitch's drop counters: every port's drop reasons, and
// the kernel's AF_XDP drops as "port:kernel.reason".
func (d *xvsDaemon) drops() (Drops, error) {
	st, err := d.stats()
	if err != nil {
		return nil, err
	}
	out := Drops{}
	for _, p := range st {
		for k, v := range p.Drops {
			out[p.Name+":"+k] += v
		}
		for _, k := range kernelDrops {
			if v, ok := p.Kernel[k]; ok {
				out[p.Name+":kernel."+k] += v
			}
		}
	}
	return out, nil
}

// testpmdDrops reads an interactive testpmd's port and forward
// statistics and returns the drop counters of the given ports.
func testpmdDrops(tp *testpmd.Process, ports ...int) (Drops, error) {
	m, err := portStats(tp, ports...)
	if err != nil {
		return nil, err
	}
	fwd, err := tp.ShowFwdStats(10 * time.Second)
	if err != nil {
		return nil, err
	}
	return portDrops(m, fwd, ports), nil
}

// portDrops picks the drop counters out of testpmd's port and forward
// statistics. The forward statistics' RX-dropped is the port's RX-missed
// again, so only their TX-dropped is taken.
func portDrops(m map[int]testpmd.PortStats, fwd testpmd.FwdStats, ports []int) Drops {
	out := Drops{}
	for _, p := range ports {
		s := m[p]
		name := fmt.Sprintf("port%d", p)
		out[name+":RX-missed"] = s.RxMissed
		out[name+":RX-errors"] = s.RxErrors
		out[name+":RX-nombuf"] = s.RxNombuf
		out[name+":TX-errors"] = s.TxErrors
		out[name+":TX-dropped"] = fwd.Ports[p].TxDropped
	}
	return out
}
