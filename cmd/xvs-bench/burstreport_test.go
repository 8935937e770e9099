package main

import (
	"strings"
	"testing"
)

// TestBurstSection: per case, each port's and direction's frames per
// burst over xvswitch's runs (median, range); DPDK's runs, failed and
// profiled runs, and cases without burst counts are left out.
func TestBurstSection(t *testing.T) {
	rep := &Report{}
	win := func(rx, rxb, tx, txb uint64) Paths {
		return Paths{"vu0": {RxQueues: []uint64{rx}, RxBursts: []uint64{rxb}, TxQueues: []uint64{tx}, TxBursts: []uint64{txb}}}
	}
	rep.Results = []Result{
		{Case: Case{Scenario: 1, Title: "VM -> switch", Size: 64, Ring: "packed", Kind: kindRate}, Runs: []Run{
			{System: sysXvswitch, PathWindow: win(640, 20, 0, 0)},
			{System: sysDPDK},
			{System: sysXvswitch, PathWindow: win(480, 20, 0, 0)},
			{System: sysXvswitch, PathWindow: win(620, 20, 0, 0)},
			{System: sysXvswitch, Error: "boom", PathWindow: win(1, 1, 0, 0)},
			{System: sysXvswitch, Profiled: true, PathWindow: win(1, 1, 0, 0)},
		}},
		{Case: Case{Scenario: 3, Title: "VM -> VM", Mode: "xconnect", Size: 64, Ring: "split", Kind: kindRate}, Runs: []Run{
			{System: sysXvswitch, PathWindow: win(320, 10, 300, 30)},
		}},
		{Case: Case{Scenario: 6, Title: "latency", Kind: kindLatency}, Runs: []Run{{System: sysXvswitch, PathWindow: win(1, 1, 1, 1)}}},
		{Case: Case{Scenario: 2, Title: "switch -> VM", Size: 64, Ring: "split", Kind: kindRate}, Runs: []Run{{System: sysXvswitch}}},
	}
	got := rep.burstSection()
	for _, want := range []string{
		"| 1 | VM -> switch | 64 | packed | vu0 rx **31.0** (24.0-32.0) |",
		"| 3 | VM -> VM (xconnect) | 64 | split | vu0 rx **32.0** (32.0-32.0), vu0 tx **10.0** (10.0-10.0) |",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in\n%s", want, got)
		}
	}
	if strings.Contains(got, "latency") || strings.Contains(got, "switch -> VM") {
		t.Errorf("a case without bursts has a row:\n%s", got)
	}
	if (&Report{}).burstSection() != "" {
		t.Error("a section without rows")
	}
}
