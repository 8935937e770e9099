package main

import (
	"bytes"
	"encoding/json"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fakeReport is a report with one result of each kind, as runCase would
// make it, for tests that need no root.
func fakeReport() *Report {
	rep := newReport(options{rounds: 2, latencyRounds: 1, probes: 3, runtimeCPUs: "0", warmup: time.Second, duration: time.Second, args: []string{"-fake"}})
	mk := func(c Case, runs ...Run) Result {
		res := Result{Case: c, Placement: placement("0", false), Runs: runs}
		res.summarize()
		return res
	}
	yes, no := true, false
	r1 := mk(newCase(1, "", 64, "packed"),
		Run{System: sysXvswitch, Round: 1, Mpps: 3, CPUSeconds: 1, CPUPercent: 100, PeakRSSMiB: 20, WindowDrops: Drops{"vu0:x": 4}, WindowDropsTotal: 4,
			Placement: &Placement{RuntimeOffWorkerCPU: &yes, Threads: []Thread{{TID: 1, CPUSeconds: 0.01}, {TID: 2, Worker: true, CPUSeconds: 1}}}},
		Run{System: sysDPDK, Round: 1, Mpps: 2, CPUSeconds: 1, CPUPercent: 100, PeakRSSMiB: 600, WindowDrops: Drops{}},
		Run{System: sysXvswitch, Round: 2, Mpps: 5, CPUSeconds: 1, CPUPercent: 100, PeakRSSMiB: 21,
			Placement: &Placement{RuntimeOffWorkerCPU: &no, Violations: []string{"thread 7 (xvswitch) allowed on worker CPU 1"}}},
		Run{System: sysDPDK, Round: 2, Error: "testpmd exited\nmore"},
		Run{System: sysXvswitch, Round: 0, Profiled: true, Mpps: 9, PeakRSSMiB: 22, Profile: &Profile{File: "profile-s1-packed-64.txt", Samples: 6000,
			Top: []ProfileEntry{{Symbol: "runtime.memmove", SelfPercent: 25.6}, {Symbol: "packed.popOne", SelfPercent: 11.8}}}})
	r1.Profile = r1.Runs[4].Profile
	lat := func(p50, p99, p999 float64) *Latency { return &Latency{Probes: 3, P50: p50, P99: p99, P999: p999} }
	r6 := mk(newCase(6, "", 64, "split"),
		Run{System: sysXvswitch, Round: 1, Latency: lat(20, 30, 40), PeakRSSMiB: 20},
		Run{System: sysDPDK, Round: 1, Latency: lat(20, 60, 90), PeakRSSMiB: 600})
	r7 := mk(newCase(7, "", 64, "split"),
		Run{System: sysXvswitch, Round: 1, CPUPercent: 0.2},
		Run{System: sysDPDK, Round: 1, CPUPercent: 100})
	for _, r := range []Result{r1, r6, r7} {
		rep.add(r)
	}
	return rep
}

func TestReportFiles(t *testing.T) {
	rep := fakeReport()
	if rep.Failed != 1 {
		t.Errorf("failed runs %d, want 1", rep.Failed)
	}
	r1 := rep.Results[0]
	// The profiled run (9 Mpps, 22 MiB) is in no summary.
	if r1.Xvswitch.BestMpps != 5 || r1.Xvswitch.MedianMpps != 4 || r1.Xvswitch.Runs != 2 || r1.DPDK.Runs != 1 || r1.Xvswitch.PeakRSSMiB != 21 {
		t.Errorf("summary %+v / %+v", r1.Xvswitch, r1.DPDK)
	}
	if r1.RatioMedian != 2 || r1.RatioBest != 2.5 {
		t.Errorf("ratios %v %v, want 2 (4/2) and 2.5 (5/2)", r1.RatioMedian, r1.RatioBest)
	}
	dir := t.TempDir()
	if err := rep.write(dir); err != nil {
		t.Fatal(err)
	}
	md, _ := os.ReadFile(filepath.Join(dir, "bench.md"))
	for _, s := range []string{
		"| xvswitch median | xvswitch best | DPDK median | DPDK best | xvs/DPDK median | xvs/DPDK best | window drops xvswitch / DPDK |",
		"| 1 | VM -> switch | 64 | packed | **4.00 Mpps** (3.00, 5.00) | 5.00 Mpps | **2.00 Mpps** (2.00) | 2.00 Mpps | 2.00x | 2.50x | 2 (4) / 0 |",
		"| 6 | NIC <-> VM latency | 64 | split | p50 20, p99 30, p99.9 40 µs (p99s 30) | p99 30 µs | p50 20, p99 60, p99.9 90 µs (p99s 60) | p99 60 µs | 0.50x | 0.50x | - / - |",
		"| 7 | idle | 64 | split | 0.20% | 0.20% | 100.00% | 100.00% | 0.0020x | 0.0020x |",
		"- s1-64-packed dpdk round 2: testpmd exited\n",
		"latency: 1 rounds of 3 round trips each",
		"`taskset -c 0 env GOMAXPROCS=2 xvswitch run --workers 1 --cpus 1 ...`",
		"had its CPU to itself (", ") in 1 of 2 runs",
		"- s1-64-packed round 2: 1 other threads allowed on the worker's CPU\n",
		"## Where xvswitch's worker spends its time",
		"- **s1-64-packed** (9.00 Mpps profiled, 6000 samples, profile-s1-packed-64.txt): 25.6% `runtime.memmove`, 11.8% `packed.popOne`\n",
	} {
		if !strings.Contains(string(md), s) {
			t.Errorf("bench.md lacks %q:\n%s", s, md)
		}
	}
	var back Report
	js, _ := os.ReadFile(filepath.Join(dir, "bench.json"))
	if err := json.Unmarshal(js, &back); err != nil || len(back.Results) != 3 || back.Results[1].Xvswitch.Latency.MedianP99 != 30 ||
		back.Results[0].Profile == nil || back.Results[0].Profile.Top[0].Symbol != "runtime.memmove" {
		t.Errorf("bench.json round trip: %v %+v", err, back.Results)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "bench.png"))
	if _, err := png.Decode(bytes.NewReader(b)); err != nil {
		t.Errorf("bench.png: %v", err)
	}
}

func TestSummarizeLatency(t *testing.T) {
	var d []time.Duration
	for i := 1; i <= 1000; i++ {
		d = append(d, time.Duration(i)*time.Microsecond)
	}
	l := summarize(d, 2*time.Second)
	if l.P50 != 500 || l.P90 != 900 || l.P99 != 990 || l.P999 != 999 || l.Max != 1000 || l.PerSec != 500 {
		t.Errorf("%+v", l)
	}
}

func TestParseFlags(t *testing.T) {
	o, err := parseFlags([]string{"-scenarios", "1,3", "-sizes", "64", "-rings", "split", "-modes", "bridge", "-rounds", "3", "-probes", "500"})
	if err != nil {
		t.Fatal(err)
	}
	cases := plan(o.scenarios, o.sizes, o.rings, o.modes, o.paths)
	if len(cases) != 2 || cases[0].ID != "s1-64-split" || cases[1].ID != "s3-bridge-64-split" || o.rounds != 3 || o.probes != 500 {
		t.Errorf("%+v", cases)
	}
	full, _ := parseFlags(nil)
	if full.rounds < 5 || full.latencyRounds < 3 || full.probes < 10000 || full.runtimeCPUs != "" || full.profile != "" {
		t.Errorf("defaults: %d rounds, %d latency rounds of %d probes, runtime CPUs %q, profile %q", full.rounds, full.latencyRounds, full.probes, full.runtimeCPUs, full.profile)
	}
	if n := len(plan(full.scenarios, full.sizes, full.rings, full.modes, full.paths)); n != 28 {
		t.Errorf("full plan has %d cases", n)
	}
	for _, bad := range [][]string{{"-scenarios", "8"}, {"-sizes", "32"}, {"-rings", "ring"}, {"-rounds", "0"}, {"-latency-rounds", "0"}, {"-probes", "0"}, {"-profile-duration", "0s"}, {"-runtime-cpus", "1"}, {"-runtime-cpus", "x"}, {"stray"}} {
		if _, err := parseFlags(bad); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}

func TestProcReadings(t *testing.T) {
	// Burn some CPU so both readings have something to see.
	x := 0
	for i := 0; i < 50_000_000; i++ {
		x ^= i * i
	}
	_ = x
	cpu, err := cpuSeconds(os.Getpid())
	if err != nil || cpu <= 0 {
		t.Errorf("cpuSeconds: %v %v", cpu, err)
	}
	st, err := statCPUSeconds(os.Getpid())
	if err != nil || st < 0 || st > cpu+0.05 {
		t.Errorf("statCPUSeconds: %v %v (schedstat %v)", st, err, cpu)
	}
	rss, err := peakRSSMiB(os.Getpid())
	if err != nil || rss <= 0 {
		t.Errorf("peakRSSMiB: %v %v", rss, err)
	}
}

// The report says what pages the guests' memory is made of.
func TestReportSaysMemoryPages(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "4 KiB pages (--no-huge)"},
		{[]string{"-huge-dir", "/dev/hugepages"}, "2 MiB hugepages from /dev/hugepages"},
	} {
		o, err := parseFlags(tc.args)
		if err != nil {
			t.Fatal(err)
		}
		if r := newReport(o); !strings.Contains(r.Guest, tc.want) {
			t.Errorf("%v: guest_config %q lacks %q", tc.args, r.Guest, tc.want)
		}
	}
}
