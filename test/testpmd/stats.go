package testpmd

import (
	"regexp"
	"strconv"
	"strings"
	"time"
)

// This file parses testpmd's two kinds of statistics from its output, one
// line at a time (other threads' log lines, e.g. VHOST_CONFIG, can land
// between the lines of a block; they are ignored).
//
// Port statistics, printed every --stats-period (or by "show port stats
// all"); counters are the port's since it started:
//
//	######################## NIC statistics for port 0  ########################
//	RX-packets: 18786519   RX-missed: 0          RX-bytes:  1202337216
//	RX-errors: 0
//	RX-nombuf:  0
//	TX-packets: 0          TX-errors: 0          TX-bytes:  0
//	Throughput (since last show)
//	Rx-pps:            0          Rx-bps:            0
//	Tx-pps:            0          Tx-bps:            0
//	############################################################################
//
// Forward statistics, printed when forwarding stops ("stop", "quit",
// SIGINT); counters are since forwarding started:
//
//	---------------------- Forward statistics for port 0  ----------------------
//	RX-packets: 18786519       RX-dropped: 0             RX-total: 18786519
//	TX-packets: 0              TX-dropped: 0             TX-total: 0
//	----------------------------------------------------------------------------
//	+++++++++++++++ Accumulated forward statistics for all ports+++++++++++++++
//	RX-packets: 18786519       RX-dropped: 0             RX-total: 18786519
//	TX-packets: 0              TX-dropped: 0             TX-total: 0
//	++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++
//
// RX-dropped is the port's imissed; TX-dropped counts frames the forwarding
// engine made or received but the port's tx_burst did not accept (a full
// ring, or a vhost port whose guest is not ready): those never left.

// PortStats is one port's block of periodic statistics. While traffic
// flows, a block's counters are read at slightly different moments (the
// PMDs keep them per queue, unsynchronised): bytes can lag packets by a
// burst. Compare bytes with packets only in a block printed after traffic
// stopped.
type PortStats struct {
	RxPackets, RxMissed, RxBytes, RxErrors, RxNombuf uint64
	TxPackets, TxErrors, TxBytes                     uint64
	// RxPPS, TxPPS are testpmd's rates since the previous block.
	RxPPS, TxPPS uint64
	// At is when the harness read the block: compute rates from two
	// blocks' counters and At (the period is not exact on a busy CPU).
	At time.Time
}

// FwdPortStats is one port's (or the total's) final forward statistics.
type FwdPortStats struct {
	RxPackets, RxDropped, RxTotal uint64
	TxPackets, TxDropped, TxTotal uint64
}

// FwdStats is what testpmd prints when forwarding stops.
type FwdStats struct {
	// Ports holds the statistics per DPDK port ID.
	Ports map[int]FwdPortStats
	// Total is the "Accumulated forward statistics for all ports".
	Total FwdPortStats
}

var (
	reNICHeader = regexp.MustCompile(`NIC statistics for port (\d+)`)
	reFwdHeader = regexp.MustCompile(`Forward statistics for port (\d+)`)
	reField     = regexp.MustCompile(`([A-Za-z][A-Za-z-]*):\s+(\d+)`)
	rePortMAC   = regexp.MustCompile(`^Port (\d+): ([0-9A-Fa-f]{2}(?::[0-9A-Fa-f]{2}){5})\s*$`)
)

// statsBlock kinds.
const (
	blockNone = iota
	blockNIC
	blockFwd
	blockTotal
)

// statsParser turns testpmd's output lines into statistics. It is fed by
// one goroutine; results are handed out through the callbacks.
type statsParser struct {
	kind   int
	port   int
	fields map[string]uint64

	fwd FwdStats // forward statistics being collected

	onPort func(port int, s PortStats)
	onFwd  func(FwdStats)
	onMAC  func(port int, mac string)
}

// cleanLine strips what interactive mode puts in front of lines (the
// prompt, carriage returns) and the surrounding blanks.
func cleanLine(l string) string {
	l = strings.TrimRight(l, "\r\n")
	for {
		t := strings.TrimLeft(l, " \t\r")
		if !strings.HasPrefix(t, "testpmd> ") {
			return strings.TrimSpace(t)
		}
		l = t[len("testpmd> "):]
	}
}

func (p *statsParser) line(raw string) {
	l := cleanLine(raw)
	if m := reNICHeader.FindStringSubmatch(l); m != nil {
		p.begin(blockNIC, m[1])
		return
	}
	if m := reFwdHeader.FindStringSubmatch(l); m != nil {
		if p.fwd.Ports == nil {
			p.fwd = FwdStats{Ports: map[int]FwdPortStats{}}
		}
		p.begin(blockFwd, m[1])
		return
	}
	if strings.Contains(l, "Accumulated forward statistics for all ports") {
		if p.fwd.Ports == nil {
			p.fwd = FwdStats{Ports: map[int]FwdPortStats{}}
		}
		p.begin(blockTotal, "0")
		return
	}
	if m := rePortMAC.FindStringSubmatch(l); m != nil && p.onMAC != nil {
		n, _ := strconv.Atoi(m[1])
		p.onMAC(n, strings.ToLower(m[2]))
		return
	}
	if p.kind == blockNone {
		return
	}
	// A block ends with a line made only of its border character.
	if l != "" && strings.Trim(l, "#-+") == "" {
		p.end()
		return
	}
	for _, m := range reField.FindAllStringSubmatch(l, -1) {
		v, err := strconv.ParseUint(m[2], 10, 64)
		if err == nil {
			p.fields[m[1]] = v
		}
	}
}

func (p *statsParser) begin(kind int, port string) {
	p.kind = kind
	p.port, _ = strconv.Atoi(port)
	p.fields = map[string]uint64{}
}

func (p *statsParser) end() {
	f := p.fields
	switch p.kind {
	case blockNIC:
		if p.onPort != nil {
			p.onPort(p.port, PortStats{
				RxPackets: f["RX-packets"], RxMissed: f["RX-missed"], RxBytes: f["RX-bytes"],
				RxErrors: f["RX-errors"], RxNombuf: f["RX-nombuf"],
				TxPackets: f["TX-packets"], TxErrors: f["TX-errors"], TxBytes: f["TX-bytes"],
				RxPPS: f["Rx-pps"], TxPPS: f["Tx-pps"],
			})
		}
	case blockFwd:
		p.fwd.Ports[p.port] = fwdPortStats(f)
	case blockTotal:
		p.fwd.Total = fwdPortStats(f)
		if p.onFwd != nil {
			p.onFwd(p.fwd)
		}
		p.fwd = FwdStats{}
	}
	p.kind = blockNone
}

func fwdPortStats(f map[string]uint64) FwdPortStats {
	return FwdPortStats{
		RxPackets: f["RX-packets"], RxDropped: f["RX-dropped"], RxTotal: f["RX-total"],
		TxPackets: f["TX-packets"], TxDropped: f["TX-dropped"], TxTotal: f["TX-total"],
	}
}
