package main

import (
	"testing"
)

func TestMedianBest(t *testing.T) {
	for _, tc := range []struct {
		v            []float64
		med, hi, low float64
	}{
		{nil, 0, 0, 0},
		{[]float64{7}, 7, 7, 7},
		{[]float64{5, 1, 3}, 3, 5, 1},
		{[]float64{4, 1, 3, 2}, 2.5, 4, 1},
		{[]float64{9, 9, 1, 9, 2}, 9, 9, 1},
	} {
		if got := median(tc.v); got != tc.med {
			t.Errorf("median(%v) = %v, want %v", tc.v, got, tc.med)
		}
		if got := best(tc.v, higher); got != tc.hi {
			t.Errorf("best(%v, higher) = %v, want %v", tc.v, got, tc.hi)
		}
		if got := best(tc.v, lower); got != tc.low {
			t.Errorf("best(%v, lower) = %v, want %v", tc.v, got, tc.low)
		}
	}
	v := []float64{3, 1, 2}
	median(v)
	if v[0] != 3 || v[1] != 1 {
		t.Errorf("median sorted its argument: %v", v)
	}
}

// Five alternated rounds: failed and profiled runs count in no summary.
func TestSummarizeRuns(t *testing.T) {
	var runs []Run
	for i, m := range []float64{10, 14, 11, 30, 12} {
		runs = append(runs, Run{System: sysXvswitch, Round: i + 1, Mpps: m, CPUPercent: float64(90 + i), WindowDropsTotal: uint64(i)})
		runs = append(runs, Run{System: sysDPDK, Round: i + 1, Mpps: m / 2, CPUPercent: 99})
	}
	runs[6].Error = "failed" // xvswitch round 4, 30 Mpps
	runs = append(runs, Run{System: sysXvswitch, Profiled: true, Mpps: 100})
	x, d := summarize1(runs, sysXvswitch), summarize1(runs, sysDPDK)
	if x.Runs != 4 || x.MedianMpps != 11.5 || x.BestMpps != 14 {
		t.Errorf("xvswitch %+v: want 4 runs, median 11.5, best 14", x)
	}
	if x.BestCPUPercent != 90 || x.CPUPercent != 91.5 || x.MedianWindowDrops != 1 || x.MaxWindowDrops != 4 {
		t.Errorf("xvswitch CPU/drops %+v", x)
	}
	if d.Runs != 5 || d.MedianMpps != 6 || d.BestMpps != 15 {
		t.Errorf("dpdk %+v", d)
	}
	med, bst := ratios(kindRate, x, d)
	if med != 11.5/6 || bst != 14.0/15 {
		t.Errorf("ratios %v %v", med, bst)
	}
	if med, bst := ratios(kindRate, x, SysSummary{}); med != 0 || bst != 0 {
		t.Errorf("ratios without DPDK runs: %v %v", med, bst)
	}
}

// Latency: the median of the runs' percentiles, the lowest p99, and the
// ratio of p99s (lower is better for both).
func TestSummarizeLatencyRuns(t *testing.T) {
	lat := func(p50, p99, p999 float64) *Latency {
		return &Latency{Probes: 10000, Lost: 1, P50: p50, P99: p99, P999: p999}
	}
	runs := []Run{
		{System: sysXvswitch, Latency: lat(30, 600, 4000)}, {System: sysDPDK, Latency: lat(27, 200, 3000)},
		{System: sysXvswitch, Latency: lat(28, 300, 1000)}, {System: sysDPDK, Latency: lat(26, 250, 5000)},
		{System: sysXvswitch, Latency: lat(29, 900, 2000)}, {System: sysDPDK, Latency: lat(28, 500, 4000)},
	}
	x, d := summarize1(runs, sysXvswitch), summarize1(runs, sysDPDK)
	l := x.Latency
	if l == nil || l.Probes != 30000 || l.Lost != 3 || l.MedianP50 != 29 || l.MedianP99 != 600 || l.MedianP999 != 2000 || l.BestP99 != 300 {
		t.Fatalf("xvswitch latency %+v", l)
	}
	if len(l.P99s) != 3 || l.P99s[0] != 600 || l.P99s[2] != 900 {
		t.Errorf("p99s %v, want run order", l.P99s)
	}
	med, bst := ratios(kindLatency, x, d)
	if med != 600.0/250 || bst != 300.0/200 {
		t.Errorf("latency ratios %v %v", med, bst)
	}
}

func TestIdleRatios(t *testing.T) {
	runs := []Run{
		{System: sysXvswitch, CPUPercent: 1.3}, {System: sysDPDK, CPUPercent: 99.9},
		{System: sysXvswitch, CPUPercent: 0.9}, {System: sysDPDK, CPUPercent: 100},
		{System: sysXvswitch, CPUPercent: 1.1}, {System: sysDPDK, CPUPercent: 99.8},
	}
	med, bst := ratios(kindIdle, summarize1(runs, sysXvswitch), summarize1(runs, sysDPDK))
	if med != 1.1/99.9 || bst != 0.9/99.8 {
		t.Errorf("idle ratios %v %v", med, bst)
	}
}
