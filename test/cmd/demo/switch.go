package main

import (
	"encoding/json"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/xvswitch/xvswitch/ctl"
)

// xvswitch is the daemon the demo runs, as a user would run it, and its
// CLI.
type xvswitch struct {
	bin  string // as the user gave it: the commands printed use it as is
	ctl  string // the control socket; "" is xvswitch's default
	proc *process
}

func (x *xvswitch) ctlPath() string {
	if x.ctl == "" {
		return ctl.DefaultPath
	}
	return x.ctl
}

// start runs `xvswitch run` with args, its log interleaved with the
// narration, and waits until it answers on its control socket. SIGTERM is
// its clean stop (XDP detached, pins and sockets removed).
func (x *xvswitch) start(s *session, args []string) {
	s.cmdline(x.bin, args...)
	log := prefixWriter(s.out, "    xvswitch| ")
	// Registered before the process's stop, so it runs after it (cleanups
	// run last first): the log's last lines are out before the pipe closes.
	s.Cleanup(func() { log.Close() })
	x.proc = start(s, log, syscall.SIGTERM, 15*time.Second, x.bin, args...)
	deadline := time.Now().Add(15 * time.Second)
	for {
		if _, err := ctl.Call(x.ctlPath(), ctl.Request{Op: "show-ports"}); err == nil {
			return
		}
		if !x.proc.running() {
			s.Fatalf("xvswitch exited: %v (its log is above)", x.proc.err)
		}
		if time.Now().After(deadline) {
			s.Fatalf("xvswitch did not answer on %s within 15 s", x.ctlPath())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// checkFree fails the demo, before it makes anything, if an xvswitch
// already answers on the control socket: the demo's would not start.
func (x *xvswitch) checkFree(s *session) {
	if _, err := ctl.Call(x.ctlPath(), ctl.Request{Op: "show-ports"}); err == nil {
		s.Fatalf("an xvswitch already answers on %s: stop it first, or give the demo another (make demo DEMO_FLAGS='-ctl /run/xvswitch/demo.sock')", x.ctlPath())
	}
}

// cliArgs is a CLI command's arguments, with the control socket if it is
// not the default.
func (x *xvswitch) cliArgs(args ...string) []string {
	if x.ctl != "" {
		args = append(args, "--ctl", x.ctl)
	}
	return args
}

// show runs an xvswitch CLI command and prints it and its output.
func (x *xvswitch) show(s *session, args ...string) {
	args = x.cliArgs(args...)
	s.cmdline(x.bin, args...)
	out, err := exec.Command(x.bin, args...).CombinedOutput()
	s.indent(string(out))
	if err != nil {
		s.Errorf("%s: %v", strings.Join(args, " "), err)
	}
}

// stats is `show stats --json`.
func (x *xvswitch) stats(s *session) []ctl.PortCounters {
	out, err := exec.Command(x.bin, x.cliArgs("show", "stats", "--json")...).Output()
	if err != nil {
		s.Fatalf("xvswitch show stats --json: %v", err)
	}
	var st []ctl.PortCounters
	if err := json.Unmarshal(out, &st); err != nil {
		s.Fatalf("xvswitch show stats --json: %v\n%s", err, out)
	}
	return st
}

// ledger is the switch's accounting across its ports: every frame a port
// received is forwarded or dropped, every copy (floods make more than one)
// sent or dropped, and segmenting a guest's TSO frame for an egress that
// cannot take it makes k frames of one (docs/offloads.md), so
// rx + flood copies + segment copies = tx + drops.
type ledger struct {
	Rx            uint64 `json:"rx"`
	FloodCopies   uint64 `json:"flood_copies"`
	SegmentCopies uint64 `json:"segment_copies"`
	Tx            uint64 `json:"tx"`
	Drops         uint64 `json:"drops"`
}

func balance(st []ctl.PortCounters) ledger {
	var l ledger
	for _, p := range st {
		l.Rx += p.RxPackets
		l.Tx += p.TxPackets
		l.FloodCopies += p.FloodCopies
		l.SegmentCopies += p.SegmentCopies
		for _, n := range p.Drops {
			l.Drops += n
		}
	}
	return l
}

func (l ledger) balanced() bool {
	return l.Rx > 0 && l.Rx+l.FloodCopies+l.SegmentCopies == l.Tx+l.Drops
}
