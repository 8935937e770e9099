package main

import (
	"strings"
	"testing"
)

// oneCaseReport is a report of one rate case (scenario 1, 64 B, split)
// whose runs are runs, for the sections' tests.
func oneCaseReport(runs []Run) *Report {
	c := Case{ID: "s1", Scenario: 1, Title: "VM -> switch", Size: 64, Ring: "split", Kind: kindRate}
	return &Report{Results: []Result{{Case: c, Runs: runs}}}
}

func TestHostStateSection(t *testing.T) {
	var runs []Run
	for i, run := range []struct {
		sys          string
		mpps, b0, b1 float64
	}{
		{sysXvswitch, 10, 50, 55}, {sysDPDK, 8, 52, 60}, // near
		{sysXvswitch, 4, 250, 240}, {sysDPDK, 5, 50, 260}, // not: ended far
		{sysXvswitch, 12, 49, 51}, {sysDPDK, 10, 250, 250},
	} {
		runs = append(runs, Run{System: run.sys, Round: i/2 + 1, Mpps: run.mpps, CrossCPU: CrossCPU{run.b0, run.b1}})
	}
	rep := oneCaseReport(runs)
	if got := nearLimit(49, 60); got != 61 {
		t.Errorf("one state (49-60 ns): limit %v, want 61 (all near)", got)
	}
	s := rep.hostStateSection()
	for _, want := range []string{
		"lowest 49 ns", "highest 260", "under 113 ns (the geometric mean", "3 of 6 rate runs were",
		// mid-rate sqrt(4*12) = 6.9: near runs 10, 8, 12 above, far
		// runs 10 above (wrong), 4 below; the one that ended far not counted.
		"of the 5 rate runs whose two probes agreed (both near or both far), 4 ran",
		"| 1 | VM -> switch | 64 | split | 11.00 Mpps (2) | 8.00 Mpps (1) | 1.38x | 4.00 Mpps (1) | 7.50 Mpps (2) | 0.53x |",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("section lacks %q:\n%s", want, s)
		}
	}
}
