package vswitch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"strings"
	"time"
)

// The metrics endpoint speaks Prometheus' text exposition format (version
// 0.0.4). It is a handful of counters, so it is written here rather than
// pulling in the Prometheus client and its dependencies.

// WriteMetrics writes the switch's counters in Prometheus text format.
func (s *Switch) WriteMetrics(w io.Writer) error {
	stats := s.Stats()
	var b strings.Builder
	counter := func(name, help string) {
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s counter\n", name, help, name)
	}
	type queueField struct {
		name, help string
		get        func(q *QueueCounters) uint64
	}
	for _, f := range []queueField{
		{"xvswitch_rx_packets_total", "Frames received by a port queue.", func(q *QueueCounters) uint64 { return q.RxPackets }},
		{"xvswitch_rx_bytes_total", "Bytes received by a port queue.", func(q *QueueCounters) uint64 { return q.RxBytes }},
		{"xvswitch_tx_packets_total", "Frames transmitted by a port queue.", func(q *QueueCounters) uint64 { return q.TxPackets }},
		{"xvswitch_tx_bytes_total", "Bytes transmitted by a port queue.", func(q *QueueCounters) uint64 { return q.TxBytes }},
		{"xvswitch_flood_copies_total", "Extra copies made by flooding frames received on a port queue.", func(q *QueueCounters) uint64 { return q.FloodCopies }},
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
	for _, p := range stats {
		for _, q := range p.Queues {
			for d := Drop(0); d < numDrops; d++ {
				fmt.Fprintf(&b, "xvswitch_drops_total{port=%q,queue=\"%d\",reason=%q} %d\n", p.Name, q.Queue, d.String(), q.Drops[d.String()])
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
	fmt.Fprintf(&b, "# HELP xvswitch_fdb_entries MACs in the forwarding database.\n# TYPE xvswitch_fdb_entries gauge\nxvswitch_fdb_entries %d\n", s.fdb.Len())
	counter("xvswitch_worker_sleeps_total", "Times a poll worker went idle and slept in epoll.")
	for _, w := range s.workers {
		fmt.Fprintf(&b, "xvswitch_worker_sleeps_total{worker=\"%d\"} %d\n", w.id, w.sleeps.Load())
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// ServeMetrics serves GET /metrics on addr until ctx ends.
func (s *Switch) ServeMetrics(ctx context.Context, addr string) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		_ = s.WriteMetrics(w)
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	if err := srv.Serve(l); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
