package main

import (
	"math"
	"sort"
)

// This file reduces a case's runs to what the table compares: for each
// system the median and the best of its successful runs, and the ratios
// xvswitch / DPDK of both (median / median, best / best). The machine's
// speed is bimodal from run to run (docs/measuring.md): the best says
// what each system can do, the median what it usually did.

// SysSummary is one system's results on one case.
type SysSummary struct {
	Runs       int     `json:"runs_ok"`
	BestMpps   float64 `json:"best_mpps,omitempty"`
	MedianMpps float64 `json:"median_mpps,omitempty"`
	// CPU time of the switching process over the window: the median of
	// the runs, and the lowest share (the best, for idle).
	CPUSeconds     float64 `json:"median_cpu_seconds"`
	CPUPercent     float64 `json:"median_cpu_percent"`
	BestCPUPercent float64 `json:"best_cpu_percent"`
	PeakRSSMiB     float64 `json:"peak_rss_mib"`
	// CPU time per counted frame (rates): the median and the lowest of
	// the runs (Run.NsPerFrame), and the median offered load.
	MedianNsPerFrame  float64 `json:"median_cpu_ns_per_frame,omitempty"`
	BestNsPerFrame    float64 `json:"best_cpu_ns_per_frame,omitempty"`
	MedianOfferedMpps float64 `json:"median_offered_mpps,omitempty"`
	// Frames the switch dropped in the measured window (by-design drops
	// of the case left out, see Case.ByDesignDrop): median and most.
	MedianWindowDrops uint64 `json:"median_window_drops"`
	MaxWindowDrops    uint64 `json:"max_window_drops"`
	// Latency summarizes the runs' round-trip distributions.
	Latency *LatencySummary `json:"latency,omitempty"`
}

// LatencySummary is one system's round trips over several runs: the
// median of the runs' percentiles, and the best (lowest) run's p99.
type LatencySummary struct {
	Probes     int       `json:"probes"` // over all runs
	Lost       int       `json:"lost"`
	MedianP50  float64   `json:"median_p50_us"`
	MedianP99  float64   `json:"median_p99_us"`
	MedianP999 float64   `json:"median_p99_9_us"`
	BestP99    float64   `json:"best_p99_us"`
	P99s       []float64 `json:"p99s_us"` // each run's, in run order
}

// summarize1 summarizes sys's successful runs. A profiled run is left
// out: perf's sampling costs the worker some of its time.
func summarize1(runs []Run, sys string) SysSummary {
	var s SysSummary
	var mpps, cpu, pct, drops, p50, p99, p999, nspf, offered []float64
	var lat LatencySummary
	for _, r := range runs {
		if r.System != sys || r.Error != "" || r.Profiled {
			continue
		}
		s.Runs++
		mpps = append(mpps, r.Mpps)
		cpu = append(cpu, r.CPUSeconds)
		pct = append(pct, r.CPUPercent)
		drops = append(drops, float64(r.WindowDropsTotal))
		if r.NsPerFrame > 0 {
			nspf = append(nspf, r.NsPerFrame)
		}
		if r.OfferedMpps > 0 {
			offered = append(offered, r.OfferedMpps)
		}
		s.PeakRSSMiB = max(s.PeakRSSMiB, r.PeakRSSMiB)
		if l := r.Latency; l != nil && l.Probes > 0 {
			lat.Probes += l.Probes
			lat.Lost += l.Lost
			p50, p99, p999 = append(p50, l.P50), append(p99, l.P99), append(p999, l.P999)
		}
	}
	if s.Runs == 0 {
		return s
	}
	s.MedianMpps, s.BestMpps = median(mpps), best(mpps, higher)
	s.CPUSeconds, s.CPUPercent = median(cpu), median(pct)
	s.BestCPUPercent = best(pct, lower)
	s.MedianNsPerFrame, s.BestNsPerFrame = median(nspf), best(nspf, lower)
	s.MedianOfferedMpps = median(offered)
	s.MedianWindowDrops, s.MaxWindowDrops = uint64(median(drops)), uint64(best(drops, higher))
	if len(p99) > 0 {
		lat.MedianP50, lat.MedianP99, lat.MedianP999 = median(p50), median(p99), median(p999)
		lat.BestP99 = best(p99, lower)
		lat.P99s = p99
		s.Latency = &lat
	}
	return s
}

// ratios compares the two systems on a case of kind: xvswitch / DPDK of
// the medians and of the bests. Rates: higher is better; latency (p99)
// and idle CPU: lower is better. 0 where either side has no result.
func ratios(kind string, x, d SysSummary) (med, bst float64) {
	if x.Runs == 0 || d.Runs == 0 {
		return 0, 0
	}
	switch kind {
	case kindRate:
		return ratio(x.MedianMpps, d.MedianMpps), ratio(x.BestMpps, d.BestMpps)
	case kindLatency:
		if x.Latency == nil || d.Latency == nil {
			return 0, 0
		}
		return ratio(x.Latency.MedianP99, d.Latency.MedianP99), ratio(x.Latency.BestP99, d.Latency.BestP99)
	case kindIdle:
		return ratio(x.CPUPercent, d.CPUPercent), ratio(x.BestCPUPercent, d.BestCPUPercent)
	}
	return 0, 0
}

func ratio(a, b float64) float64 {
	if b <= 0 {
		return 0
	}
	return a / b
}

// median of v (the mean of the middle two for an even count); 0 if empty.
func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

const (
	higher = true  // best is the largest (rates)
	lower  = false // best is the smallest (latency, idle CPU)
)

// best is v's largest value (higherIsBetter) or smallest; 0 if empty.
func best(v []float64, higherIsBetter bool) float64 {
	if len(v) == 0 {
		return 0
	}
	b := v[0]
	for _, x := range v[1:] {
		if higherIsBetter {
			b = math.Max(b, x)
		} else {
			b = math.Min(b, x)
		}
	}
	return b
}
