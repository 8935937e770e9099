// Package metrics serves a running switch's counters at /metrics for
// Prometheus: per-port state, per-queue traffic and drops by reason, the
// kernel's counters of NIC ports (XDP verdicts, AF_XDP statistics, what
// happened to the interface), the FDB's size and refused learning, the
// workers' sleeps, and the process and build. docs/metrics.md lists the
// series.
//
// It reads the switch through Source, at scrape time only: one collector
// asks Source for everything when Prometheus scrapes, and the data path
// never touches a metric. So it depends on the control protocol's types,
// not on the data path.
//
// It uses the Prometheus Go client rather than writing the format by
// hand: its registry checks names, types and label sets and refuses
// duplicate series, it has the process and build-info collectors, and it
// writes whichever exposition format the scraper asks for.
package metrics
