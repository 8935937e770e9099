package metrics

import "github.com/xvswitch/xvswitch/ctl"

// Source is what the metrics are read from: a running switch. Each method
// is called once per scrape.
type Source interface {
	// Ports lists the ports with their kind and state, as `show ports`.
	Ports() []ctl.PortInfo
	// Stats is every port's counters, as `show stats` prints them.
	Stats() []ctl.PortCounters
	// DropReasons names every drop reason, so each has a series (zeros
	// included) whether or not it happened yet.
	DropReasons() []string
	// FDBLen is how many MACs the forwarding database holds.
	FDBLen() int
	// WorkerSleeps is, per poll worker, how often it slept in epoll.
	WorkerSleeps() []uint64
	// StreamWindows is how many of the receive rings' measuring windows
	// chose ordinary and streaming stores for the frames they may stream.
	StreamWindows() (ordinary, streaming uint64)
}

// Build names the running program, for xvswitch_build_info.
type Build struct {
	Version string // the release, or "devel"
	Commit  string // the commit it was built from; "" if unknown
}
