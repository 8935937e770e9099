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
	rep := newReport(options{rounds: 1, warmup: time.Second, duration: time.Second, args: []string{"-fake"}})
	mk := func(c Case, runs ...Run) Result {
		res := Result{Case: c, Placement: placement, Runs: runs}
		res.Xvswitch, res.DPDK = summarize1(runs, sysXvswitch), summarize1(runs, sysDPDK)
		return res
	}
	r1 := mk(newCase(1, "", 64, "packed"),
		Run{System: sysXvswitch, Round: 1, Mpps: 3, CPUSeconds: 1, CPUPercent: 100, PeakRSSMiB: 20},
		Run{System: sysDPDK, Round: 1, Mpps: 2, CPUSeconds: 1, CPUPercent: 100, PeakRSSMiB: 600},
		Run{System: sysXvswitch, Round: 2, Mpps: 5, CPUSeconds: 1, CPUPercent: 100, PeakRSSMiB: 21},
		Run{System: sysDPDK, Round: 2, Error: "testpmd exited\nmore"})
	r1.Ratio = r1.Xvswitch.BestMpps / r1.DPDK.BestMpps
	lat := summarize([]time.Duration{10 * time.Microsecond, 20 * time.Microsecond, 30 * time.Microsecond}, time.Second)
	r6 := mk(newCase(6, "", 64, "split"),
		Run{System: sysXvswitch, Round: 1, Latency: lat, PeakRSSMiB: 20},
		Run{System: sysDPDK, Round: 1, Latency: lat, PeakRSSMiB: 600})
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
	if r1.Xvswitch.BestMpps != 5 || r1.Xvswitch.MedianMpps != 4 || r1.DPDK.Runs != 1 || r1.Xvswitch.PeakRSSMiB != 21 {
		t.Errorf("summary %+v / %+v", r1.Xvswitch, r1.DPDK)
	}
	dir := t.TempDir()
	if err := rep.write(dir); err != nil {
		t.Fatal(err)
	}
	md, _ := os.ReadFile(filepath.Join(dir, "bench.md"))
	for _, s := range []string{
		"| 1 | VM -> switch | 64 | packed | **5.00 Mpps** (3.00, 5.00) | **2.00 Mpps** (2.00) | 2.50x |",
		"p50 20 µs, p99 30 µs",
		"- s1-64-packed dpdk round 2: testpmd exited\n",
	} {
		if !strings.Contains(string(md), s) {
			t.Errorf("bench.md lacks %q:\n%s", s, md)
		}
	}
	var back Report
	js, _ := os.ReadFile(filepath.Join(dir, "bench.json"))
	if err := json.Unmarshal(js, &back); err != nil || len(back.Results) != 3 || back.Results[1].Xvswitch.Latency.P99 != 30 {
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
	o, err := parseFlags([]string{"-scenarios", "1,3", "-sizes", "64", "-rings", "split", "-modes", "bridge", "-rounds", "3"})
	if err != nil {
		t.Fatal(err)
	}
	cases := plan(o.scenarios, o.sizes, o.rings, o.modes)
	if len(cases) != 2 || cases[0].ID != "s1-64-split" || cases[1].ID != "s3-bridge-64-split" || o.rounds != 3 {
		t.Errorf("%+v", cases)
	}
	full, _ := parseFlags(nil)
	if n := len(plan(full.scenarios, full.sizes, full.rings, full.modes)); n != 28 {
		t.Errorf("full plan has %d cases", n)
	}
	for _, bad := range [][]string{{"-scenarios", "8"}, {"-sizes", "32"}, {"-rings", "ring"}, {"-rounds", "0"}, {"stray"}} {
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
