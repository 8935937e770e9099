package metrics

import (
	"fmt"
	"runtime"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// The switch's own series, but for the kernel's (kernel.go).
var (
	buildInfo = prometheus.NewDesc("xvswitch_build_info",
		"The running xvswitch's version and commit, and the Go release it was built with; always 1.",
		[]string{"version", "commit", "goversion"}, nil)

	portUp = prometheus.NewDesc("xvswitch_port_up",
		"1 if the port can carry frames (NIC or generator up, vhost device ready), 0 otherwise (see xvswitch_port_info's state).",
		[]string{"port"}, nil)
	portInfo = prometheus.NewDesc("xvswitch_port_info",
		"A port's kind (nic, vhost, gen) and state (nic: up, down, gone, degraded; vhost: waiting, ready, stopped, broken); always 1.",
		[]string{"port", "kind", "state"}, nil)

	rxPackets = queueCounter("xvswitch_rx_packets_total", "Frames received by a port queue.")
	rxBytes   = queueCounter("xvswitch_rx_bytes_total", "Bytes received by a port queue.")
	txPackets = queueCounter("xvswitch_tx_packets_total", "Frames transmitted by a port queue.")
	txBytes   = queueCounter("xvswitch_tx_bytes_total", "Bytes transmitted by a port queue.")
	rxBursts  = queueCounter("xvswitch_rx_bursts_total", "Bursts in which a port queue received at least one frame; rx_packets / rx_bursts is the average burst.")
	txBursts  = queueCounter("xvswitch_tx_bursts_total", "Bursts in which a port queue transmitted at least one frame; tx_packets / tx_bursts is the average burst.")
	flood     = queueCounter("xvswitch_flood_copies_total", "Extra copies made by flooding frames received on a port queue.")
	segCopies = queueCounter("xvswitch_segment_copies_total", "Extra frames a port queue made by segmenting TSO frames in software (k segments of one frame add k-1).")
	zerocopy  = queueCounter("xvswitch_zerocopy_frames_total", "Frames a port queue sent without a copy by the switch (the guest's buffer was the NIC's); not the AF_XDP bind mode.")
	copied    = queueCounter("xvswitch_copied_frames_total", "Frames a port queue sent that the switch copied (into a guest's buffers or a UMEM frame).")
	copiedB   = queueCounter("xvswitch_copied_bytes_total", "Bytes the switch copied to send frames on a port queue.")
	streamed  = queueCounter("xvswitch_streamed_frames_total", "Frames of xvswitch_copied_frames_total written into a guest's buffers with streaming stores, where the guest's receive ring measured that cheaper (a DPDK guest's short frames, while its CPU is far from the worker's; a Linux guest's frames, their header's line).")
	drops     = prometheus.NewDesc("xvswitch_drops_total",
		"Frames dropped by a port queue, by reason.",
		[]string{"port", "queue", "reason"}, nil)

	fdbEntries = prometheus.NewDesc("xvswitch_fdb_entries",
		"MACs in the forwarding database.", nil, nil)
	learnRefused = prometheus.NewDesc("xvswitch_fdb_learn_refused_total",
		"Source MACs not learned because the port held its limit of learned MACs (the frames were forwarded).",
		[]string{"port"}, nil)

	workerSleeps = prometheus.NewDesc("xvswitch_worker_sleeps_total",
		"Times a poll worker went idle and slept in epoll.",
		[]string{"worker"}, nil)

	streamWindows = prometheus.NewDesc("xvswitch_guest_rx_store_windows_total",
		"Windows (16 timed bursts each way) in which a guest's receive ring chose streaming or ordinary stores for the frames the switch writes into it; xvswitch_streamed_frames_total says which port's frames streamed.",
		[]string{"stores"}, nil)
)

func queueCounter(name, help string) *prometheus.Desc {
	return prometheus.NewDesc(name, help, []string{"port", "queue"}, nil)
}

// upStates are the states in which a port carries frames.
var upStates = map[string]bool{"up": true, "ready": true}

// collector reads the whole switch from its Source when Prometheus
// scrapes, and only then.
type collector struct {
	src   Source
	build Build
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{buildInfo, portUp, portInfo, rxPackets, rxBytes, txPackets, txBytes, rxBursts, txBursts, flood, segCopies, zerocopy, copied, copiedB, streamed, drops,
		fdbEntries, learnRefused, workerSleeps, streamWindows} {
		ch <- d
	}
	describeKernel(ch)
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	commit := c.build.Commit
	if commit == "" {
		commit = "unknown"
	}
	gauge(buildInfo, 1, c.build.Version, commit, runtime.Version())
	for _, p := range c.src.Ports() {
		up := 0.0
		if upStates[p.State] {
			up = 1
		}
		gauge(portUp, up, p.Name)
		gauge(portInfo, 1, p.Name, p.Kind, p.State)
	}
	reasons := c.src.DropReasons()
	known := make(map[string]bool, len(reasons))
	for _, r := range reasons {
		known[r] = true
	}
	for _, p := range c.src.Stats() {
		for i := range p.Queues {
			q := &p.Queues[i]
			queue := strconv.Itoa(q.Queue)
			counter(rxPackets, q.RxPackets, p.Name, queue)
			counter(rxBytes, q.RxBytes, p.Name, queue)
			counter(txPackets, q.TxPackets, p.Name, queue)
			counter(txBytes, q.TxBytes, p.Name, queue)
			counter(rxBursts, q.RxBursts, p.Name, queue)
			counter(txBursts, q.TxBursts, p.Name, queue)
			counter(flood, q.FloodCopies, p.Name, queue)
			counter(segCopies, q.SegmentCopies, p.Name, queue)
			counter(zerocopy, q.ZerocopyFrames, p.Name, queue)
			counter(copied, q.CopiedFrames, p.Name, queue)
			counter(copiedB, q.CopiedBytes, p.Name, queue)
			counter(streamed, q.StreamedFrames, p.Name, queue)
			for _, r := range reasons {
				counter(drops, q.Drops[r], p.Name, queue, r)
			}
			for r := range q.Drops {
				if !known[r] {
					unmapped(ch, fmt.Errorf("metrics: port %s queue %d: drop reason %q is not among DropReasons", p.Name, q.Queue, r))
				}
			}
		}
		counter(learnRefused, p.LearnRefused, p.Name)
		collectKernel(ch, p)
	}
	gauge(fdbEntries, float64(c.src.FDBLen()))
	for id, n := range c.src.WorkerSleeps() {
		counter(workerSleeps, n, strconv.Itoa(id))
	}
	ordinary, streaming := c.src.StreamWindows()
	counter(streamWindows, ordinary, "ordinary")
	counter(streamWindows, streaming, "streaming")
}

var _ prometheus.Collector = (*collector)(nil)

// unmapped reports a counter the metrics have no series for: the scrape
// still serves every other series, the endpoint logs err, and a test
// that gathers the registry fails.
func unmapped(ch chan<- prometheus.Metric, err error) {
	ch <- prometheus.NewInvalidMetric(prometheus.NewInvalidDesc(err), err)
}
