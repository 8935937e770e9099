package main

import (
	"strings"
	"testing"

	"github.com/xvswitch/xvswitch/test/hostprobe"
)

func TestStealSince(t *testing.T) {
	s0, err := hostprobe.StealMs()
	if err != nil {
		t.Fatal(err)
	}
	st := stealSince(s0)
	if st == nil || st.GuestMs < 0 || st.SwitchMs < 0 {
		t.Fatalf("stealSince: %+v", st)
	}
	if stealSince(nil) != nil {
		t.Error("stealSince(nil) is not nil")
	}
}

func TestStealSection(t *testing.T) {
	var runs []Run
	for i, run := range []struct {
		sys        string
		mpps, g, s float64
	}{
		{sysXvswitch, 10, 0, 10}, {sysDPDK, 8, 20, 0}, // clean: within 20 ms of 2 s
		{sysXvswitch, 4, 0, 400}, {sysDPDK, 5, 30, 0}, // not
		{sysXvswitch, 12, 0, 0}, {sysDPDK, 10, 0, 0},
	} {
		runs = append(runs, Run{System: run.sys, Round: i/2 + 1, Mpps: run.mpps, WallSeconds: 2, Steal: &Steal{GuestMs: run.g, SwitchMs: run.s}})
	}
	runs = append(runs, Run{System: sysXvswitch, Round: 4, Mpps: 1, WallSeconds: 2}) // no steal recorded: not counted
	rep := oneCaseReport(runs)
	s := rep.stealSection()
	for _, want := range []string{
		"4 of 6 rate runs did", "was 0.8% (median), 20.0% at most",
		"| 1 | VM -> switch | 64 | split | 11.00 Mpps (2) | 9.00 Mpps (2) | 1.22x | 1 / 1 |",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("section lacks %q:\n%s", want, s)
		}
	}
	if (&Report{}).stealSection() != "" {
		t.Error("a report without steal records has a steal section")
	}
}
