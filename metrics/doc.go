// Package metrics serves a running switch's counters at /metrics in
// Prometheus' text exposition format (version 0.0.4): per-queue traffic,
// drops by reason, the kernel's counters of NIC ports, the FDB's size and
// the workers' sleeps. It reads them through Source, so it depends on the
// control protocol's types, not on the data path.
//
// It is a handful of counters, so the format is written here rather than
// pulling in the Prometheus client and its dependencies.
package metrics
