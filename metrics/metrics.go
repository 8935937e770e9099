package metrics

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/xvswitch/xvswitch/ctl"
)

// Source is what the metrics are read from: a running switch.
type Source interface {
	// Stats is every port's counters, as `show stats` prints them.
	Stats() []ctl.PortCounters
	// DropReasons names every drop reason, so each has a series (zeros
	// included) whether or not it happened yet.
	DropReasons() []string
	// FDBLen is how many MACs the forwarding database holds.
	FDBLen() int
	// WorkerSleeps is, per poll worker, how often it slept in epoll.
	WorkerSleeps() []uint64
}

// Write writes src's counters in Prometheus text format.
func Write(w io.Writer, src Source) error {
	stats := src.Stats()
	var b strings.Builder
	counter := func(name, help string) {
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s counter\n", name, help, name)
	}
	type queueField struct {
		name, help string
		get        func(q *ctl.QueueCounters) uint64
	}
	for _, f := range []queueField{
		{"xvswitch_rx_packets_total", "Frames received by a port queue.", func(q *ctl.QueueCounters) uint64 { return q.RxPackets }},
		{"xvswitch_rx_bytes_total", "Bytes received by a port queue.", func(q *ctl.QueueCounters) uint64 { return q.RxBytes }},
		{"xvswitch_tx_packets_total", "Frames transmitted by a port queue.", func(q *ctl.QueueCounters) uint64 { return q.TxPackets }},
		{"xvswitch_tx_bytes_total", "Bytes transmitted by a port queue.", func(q *ctl.QueueCounters) uint64 { return q.TxBytes }},
		{"xvswitch_flood_copies_total", "Extra copies made by flooding frames received on a port queue.", func(q *ctl.QueueCounters) uint64 { return q.FloodCopies }},
	} {
		counter(f.name, f.help)
		for _, p := range stats {
			for i := range p.Queues {
				q := &p.Queues[i]
				fmt.Fprintf(&b, "%s{port=%q,queue=\"%d\"} %d\n", f.name, p.Name, q.Queue, f.get(q))
			}
		}
	}
	counter("xvswitch_drops_total", "Frames dropped by a port queue, by reason.")
	reasons := src.DropReasons()
	for _, p := range stats {
		for _, q := range p.Queues {
			for _, r := range reasons {
				fmt.Fprintf(&b, "xvswitch_drops_total{port=%q,queue=\"%d\",reason=%q} %d\n", p.Name, q.Queue, r, q.Drops[r])
			}
		}
	}
	counter("xvswitch_kernel_total", "Counters the kernel keeps for a port (XDP verdicts, AF_XDP statistics).")
	for _, p := range stats {
		keys := make([]string, 0, len(p.Kernel))
		for k := range p.Kernel {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(&b, "xvswitch_kernel_total{port=%q,counter=%q} %d\n", p.Name, k, p.Kernel[k])
		}
	}
	counter("xvswitch_fdb_learn_refused_total", "Source MACs not learned because the port held its limit of learned MACs (the frames were forwarded).")
	for _, p := range stats {
		fmt.Fprintf(&b, "xvswitch_fdb_learn_refused_total{port=%q} %d\n", p.Name, p.LearnRefused)
	}
	fmt.Fprintf(&b, "# HELP xvswitch_fdb_entries MACs in the forwarding database.\n# TYPE xvswitch_fdb_entries gauge\nxvswitch_fdb_entries %d\n", src.FDBLen())
	counter("xvswitch_worker_sleeps_total", "Times a poll worker went idle and slept in epoll.")
	for id, n := range src.WorkerSleeps() {
		fmt.Fprintf(&b, "xvswitch_worker_sleeps_total{worker=\"%d\"} %d\n", id, n)
	}
	_, err := io.WriteString(w, b.String())
	return err
}
