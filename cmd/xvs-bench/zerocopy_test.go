package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/xvswitch/xvswitch/ctl"
)

// TestZerocopyPlan: scenarios 4 and 5 run one xvswitch system per path
// beside DPDK, on a 2-queue wire when the zero-copy path is in; the other
// scenarios, and a copy-only plan, keep the two systems of before (and
// their IDs and JSON).
func TestZerocopyPlan(t *testing.T) {
	o, err := parseFlags([]string{"-scenarios", "3,4,5", "-sizes", "64", "-rings", "packed", "-modes", "xconnect"})
	if err != nil {
		t.Fatal(err)
	}
	cases := plan(o.scenarios, o.sizes, o.rings, o.modes, o.paths)
	var ids []string
	for _, c := range cases {
		ids = append(ids, c.ID)
	}
	if !reflect.DeepEqual(ids, []string{"s3-xconnect-64-packed", "s4-64-packed", "s5-64-packed"}) {
		t.Fatalf("cases %v", ids)
	}
	three := []string{sysXvswitch, sysXvswitchZerocopy, sysDPDK}
	if got := cases[0].systems(); !reflect.DeepEqual(got, []string{sysXvswitch, sysDPDK}) || cases[0].Systems != nil || cases[0].WireQueues != 0 {
		t.Errorf("s3 systems %v (%v), wire queues %d", got, cases[0].Systems, cases[0].WireQueues)
	}
	for _, c := range cases[1:] {
		if !reflect.DeepEqual(c.systems(), three) || c.WireQueues != 2 {
			t.Errorf("%s: systems %v, wire queues %d", c.ID, c.systems(), c.WireQueues)
		}
	}
	if c := plan([]int{4}, []int{64}, []string{"split"}, nil, []string{pathCopy})[0]; c.Systems != nil || c.WireQueues != 0 || c.has(sysXvswitchZerocopy) {
		t.Errorf("-paths copy: %+v", c)
	}
	if c := plan([]int{5}, []int{64}, []string{"split"}, nil, []string{pathZerocopy})[0]; !reflect.DeepEqual(c.systems(), []string{sysXvswitchZerocopy, sysDPDK}) {
		t.Errorf("-paths zerocopy: %v", c.systems())
	}
	if c := plan([]int{1}, []int{64}, []string{"split"}, nil, []string{pathZerocopy})[0]; c.Systems != nil {
		t.Errorf("scenario 1 with -paths zerocopy: %v", c.Systems)
	}
	if _, err := parseFlags([]string{"-paths", "fast"}); err == nil {
		t.Error("-paths fast accepted")
	}
	if _, err := parseFlags([]string{"-idle-after", "soon"}); err == nil {
		t.Error("-idle-after soon accepted")
	}
	if so := smokeOptions(t.TempDir()); !reflect.DeepEqual(so.paths, []string{pathCopy, pathZerocopy}) {
		t.Errorf("smoke paths %v", so.paths)
	}
}

func TestPathsSince(t *testing.T) {
	before := Paths{"vu0": {PathCounters: ctl.PathCounters{ZerocopyFrames: 10, CopiedFrames: 5, CopiedBytes: 320, StreamedFrames: 2}, TxQueues: []uint64{15}},
		"nic0": {RxQueues: []uint64{100, 3, 0}, Kernel: map[string]uint64{"xdp_redirected": 100, "xdp_group_passed": 2}}}
	after := Paths{"vu0": {PathCounters: ctl.PathCounters{ZerocopyFrames: 110, CopiedFrames: 5, CopiedBytes: 320, StreamedFrames: 5}, TxQueues: []uint64{115}},
		"nic0": {RxQueues: []uint64{200, 3, 0}, Kernel: map[string]uint64{"xdp_redirected": 200, "xdp_group_passed": 2}}}
	got := after.since(before)
	want := Paths{"vu0": {PathCounters: ctl.PathCounters{ZerocopyFrames: 100, StreamedFrames: 3}, TxQueues: []uint64{100}},
		"nic0": {RxQueues: []uint64{100, 0, 0}, Kernel: map[string]uint64{"xdp_redirected": 100}}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("since:\n got %+v\nwant %+v", got, want)
	}
}

// TestZerocopyReport: a case with the three systems gets its summaries,
// CPU per frame, and a row per system in bench.md's zero-copy table,
// with the path its frames took; bench.json keeps the path counters.
func TestZerocopyReport(t *testing.T) {
	rep := newReport(options{rounds: 2, latencyRounds: 1, probes: 1, runtimeCPUs: "0", idleAfter: "1ns", args: []string{"-fake"}})
	c := newPathCase(4, "", 1518, "packed", []string{pathCopy, pathZerocopy})
	vu := func(zc, copied uint64) Paths {
		return Paths{"vu0": {PathCounters: ctl.PathCounters{ZerocopyFrames: zc, CopiedFrames: copied, CopiedBytes: copied * 1518}}, "nic0": {}}
	}
	res := Result{Case: c, Runs: []Run{
		{System: sysXvswitch, Round: 1, Mpps: 0.3, OfferedMpps: 0.4, NsPerFrame: 2000, PathWindow: vu(0, 600)},
		{System: sysXvswitchZerocopy, Round: 1, Mpps: 0.25, OfferedMpps: 0.5, NsPerFrame: 1500, WindowDropsTotal: 7, PathWindow: vu(500, 0)},
		{System: sysDPDK, Round: 1, Mpps: 0.13, OfferedMpps: 0.3, NsPerFrame: 4000},
		{System: sysXvswitch, Round: 2, Mpps: 0.2, OfferedMpps: 0.4, NsPerFrame: 3000, PathWindow: vu(0, 400)},
		{System: sysXvswitchZerocopy, Round: 2, Mpps: 0.35, OfferedMpps: 0.5, NsPerFrame: 1000, PathWindow: vu(699, 1)},
		{System: sysDPDK, Round: 2, Error: "testpmd exited"},
	}}
	res.summarize()
	rep.add(res)
	z := res.XvswitchZerocopy
	if z == nil || z.Runs != 2 || z.MedianNsPerFrame != 1250 || z.BestNsPerFrame != 1000 || z.MedianOfferedMpps != 0.5 || res.Xvswitch.MedianNsPerFrame != 2500 {
		t.Fatalf("summaries: zero-copy %+v, copy %+v", z, res.Xvswitch)
	}
	dir := t.TempDir()
	if err := rep.write(dir); err != nil {
		t.Fatal(err)
	}
	md, _ := os.ReadFile(filepath.Join(dir, "bench.md"))
	for _, s := range []string{
		"## Zero-copy NIC <-> VM",
		"| 4 | NIC -> VM | 1518 | packed | xvswitch, copy path | **0.250 Mpps** (0.300, 0.200) | 0.400 Mpps | 0 | **2500 ns** (2000, 3000) | 2000 ns | - | 0.0% zero-copy: 0 zero-copy, 1000 copied, 1518.0 B copied per frame |",
		"| 4 | NIC -> VM | 1518 | packed | xvswitch, zero-copy path (own=) | **0.300 Mpps** (0.250, 0.350) | 0.500 Mpps | 3 (7) | **1250 ns** (1500, 1000) | 1000 ns | 0.50x | 99.9% zero-copy: 1199 zero-copy, 1 copied, 1.3 B copied per frame |",
		"| 4 | NIC -> VM | 1518 | packed | DPDK af_xdp + vhost | **0.130 Mpps** (0.130) | 0.300 Mpps | 0 | **4000 ns** (4000) | 4000 ns | 1.60x | (no such counters) |",
		"`taskset -c 0 env GOMAXPROCS=2 xvswitch run --idle-after 1ns --workers 1 --cpus 1 ...`",
	} {
		if !strings.Contains(string(md), s) {
			t.Errorf("bench.md lacks %q:\n%s", s, md)
		}
	}
	var back Report
	js, _ := os.ReadFile(filepath.Join(dir, "bench.json"))
	if err := json.Unmarshal(js, &back); err != nil {
		t.Fatal(err)
	}
	br := back.Results[0]
	if !reflect.DeepEqual(br.systems(), c.systems()) || br.WireQueues != 2 || br.XvswitchZerocopy == nil ||
		br.Runs[4].PathWindow["vu0"].ZerocopyFrames != 699 || br.Runs[4].NsPerFrame != 1000 {
		t.Errorf("bench.json round trip: %+v", br)
	}
}

// TestPerBurst: the window's frames per burst, per port and direction,
// over all queues; a port or direction without bursts is left out.
func TestPerBurst(t *testing.T) {
	now := Paths{
		"vu0":  {RxQueues: []uint64{640}, RxBursts: []uint64{20}, TxQueues: []uint64{100, 50}, TxBursts: []uint64{10, 40}},
		"gen0": {RxQueues: []uint64{64}, RxBursts: []uint64{2}},
		"idle": {RxQueues: []uint64{0}, RxBursts: []uint64{0}},
	}
	before := Paths{"vu0": {RxQueues: []uint64{0}, RxBursts: []uint64{0}, TxQueues: []uint64{10, 0}, TxBursts: []uint64{5, 0}}}
	if got, want := now.since(before).perBurst(), "gen0 rx 32.0, vu0 rx 32.0 tx 3.1"; got != want {
		t.Errorf("perBurst %q, want %q", got, want)
	}
}

// TestStreamedShare: the window's share of each port's copied frames
// written with streaming stores; a port that streamed none is left out.
func TestStreamedShare(t *testing.T) {
	now := Paths{
		"vu0":  {PathCounters: ctl.PathCounters{CopiedFrames: 1100, StreamedFrames: 1000}},
		"vu1":  {PathCounters: ctl.PathCounters{CopiedFrames: 500, StreamedFrames: 0}},
		"nic0": {PathCounters: ctl.PathCounters{CopiedFrames: 300}},
	}
	before := Paths{"vu0": {PathCounters: ctl.PathCounters{CopiedFrames: 100, StreamedFrames: 25}}}
	if got, want := now.since(before).streamed(), "vu0 98%"; got != want {
		t.Errorf("streamed %q, want %q", got, want)
	}
}
