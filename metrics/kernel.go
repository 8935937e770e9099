package metrics

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/xvswitch/xvswitch/ctl"
)

// The kernel's counters of a port (ctl.PortCounters.Kernel, NIC ports
// only) each have a series of their own: the program's verdicts by
// verdict, each AF_XDP statistic as a counter, the interface's events by
// event. A key missing from kernelSeries is an error at scrape time, not
// a series under some catch-all name; metrics' tests check that every
// key the switch can report (vswitch.KernelCounters) is here.
var (
	xdpPackets = prometheus.NewDesc("xvswitch_xdp_packets_total",
		"Frames the port's XDP program saw, by verdict: redirected to an AF_XDP socket, or passed to the kernel and why.",
		[]string{"port", "verdict"}, nil)

	afxdpRxDropped = afxdpCounter("rx_dropped",
		"Frames the kernel dropped on the port's AF_XDP sockets for reasons other than invalid descriptors (XDP_STATISTICS rx_dropped).")
	afxdpRxRingFull = afxdpCounter("rx_ring_full",
		"Frames the kernel dropped because an AF_XDP socket's RX ring was full (XDP_STATISTICS rx_ring_full).")
	afxdpFillRingEmpty = afxdpCounter("rx_fill_ring_empty",
		"Times the kernel found an AF_XDP socket's fill ring empty (XDP_STATISTICS rx_fill_ring_empty_descs).")
	afxdpRxInvalid = afxdpCounter("rx_invalid_descs",
		"Fill ring descriptors the kernel refused on the port's AF_XDP sockets (XDP_STATISTICS rx_invalid_descs).")
	afxdpTxInvalid = afxdpCounter("tx_invalid_descs",
		"TX ring descriptors the kernel refused on the port's AF_XDP sockets (XDP_STATISTICS tx_invalid_descs).")

	afpacketDropped = prometheus.NewDesc("xvswitch_afpacket_dropped_total",
		"Group frames the host's kernel received on the NIC that the port's AF_PACKET ring had no room for: the host got them, the VMs did not (PACKET_STATISTICS tp_drops).",
		[]string{"port"}, nil)

	nicEvents = prometheus.NewDesc("xvswitch_nic_events_total",
		"Things that happened to a NIC port's interface, by event (docs/nic-faults.md).",
		[]string{"port", "event"}, nil)
	nicCsumCompleted = prometheus.NewDesc("xvswitch_nic_csum_completed_total",
		"Frames from the NIC whose TCP or UDP checksum the port completed: its sender left it partial (checksum offload on a veth peer, docs/afxdp-veth.md).",
		[]string{"port"}, nil)
	nicRecoveryErrors = prometheus.NewDesc("xvswitch_nic_recovery_errors_total",
		"Attempts to attach a NIC port to its interface again that failed (each is tried again).",
		[]string{"port"}, nil)
)

var nicOwnerDiscarded = prometheus.NewDesc("xvswitch_nic_owner_rx_discarded_total",
	"Frames left in an owning VM's socket on a NIC queue when the socket closed (its memory table replaced, the VM gone): the kernel delivered them, the switch never received them.",
	[]string{"port"}, nil)

func afxdpCounter(stat, help string) *prometheus.Desc {
	return prometheus.NewDesc("xvswitch_afxdp_"+stat+"_total", help, []string{"port"}, nil)
}

// kernelSeries maps each kernel counter key to its series: a desc, and
// the value of its label beside port, if it has one.
var kernelSeries = map[string]struct {
	desc  *prometheus.Desc
	label string
}{
	"xdp_redirected":         {xdpPackets, "redirected"},
	"xdp_no_socket_passed":   {xdpPackets, "no_socket_passed"},
	"xdp_bad_queue_passed":   {xdpPackets, "bad_queue_passed"},
	"xdp_not_owned_passed":   {xdpPackets, "not_owned_passed"},
	"xdp_host_arp_passed":    {xdpPackets, "host_arp_passed"},
	"xdp_host_nd_passed":     {xdpPackets, "host_nd_passed"},
	"xdp_short_passed":       {xdpPackets, "short_passed"},
	"xdp_group_passed":       {xdpPackets, "group_passed"},
	"xdp_owned_queue_passed": {xdpPackets, "owned_queue_passed"},

	"af_xdp_rx_dropped":         {afxdpRxDropped, ""},
	"af_xdp_rx_ring_full":       {afxdpRxRingFull, ""},
	"af_xdp_rx_fill_ring_empty": {afxdpFillRingEmpty, ""},
	"af_xdp_rx_invalid_descs":   {afxdpRxInvalid, ""},
	"af_xdp_tx_invalid_descs":   {afxdpTxInvalid, ""},

	"af_packet_dropped": {afpacketDropped, ""},

	"link_down_events":    {nicEvents, "link_down"},
	"nic_gone_events":     {nicEvents, "gone"},
	"nic_reattached":      {nicEvents, "reattached"},
	"mtu_changes":         {nicEvents, "mtu_change"},
	"xdp_detached_events": {nicEvents, "xdp_detached"},
	"xdp_reattached":      {nicEvents, "xdp_reattached"},
	"xdp_replaced_events": {nicEvents, "xdp_replaced"},
	"recovery_errors":     {nicRecoveryErrors, ""},
	"csum_completed":      {nicCsumCompleted, ""},
	"owner_rx_discarded":  {nicOwnerDiscarded, ""},
}

func describeKernel(ch chan<- *prometheus.Desc) {
	seen := map[*prometheus.Desc]bool{}
	for _, s := range kernelSeries {
		if !seen[s.desc] {
			seen[s.desc] = true
			ch <- s.desc
		}
	}
}

// collectKernel gives each of p's kernel counters its series.
func collectKernel(ch chan<- prometheus.Metric, p ctl.PortCounters) {
	for key, v := range p.Kernel {
		s, ok := kernelSeries[key]
		if !ok {
			unmapped(ch, fmt.Errorf("metrics: port %s: kernel counter %q has no series", p.Name, key))
			continue
		}
		labels := []string{p.Name}
		if s.label != "" {
			labels = append(labels, s.label)
		}
		ch <- prometheus.MustNewConstMetric(s.desc, prometheus.CounterValue, float64(v), labels...)
	}
}
