package main

import (
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"sync/atomic"
	"time"
)

// Run is one measurement of one system on one case.
type Run struct {
	System          string   `json:"system"`
	Round           int      `json:"round"`
	Mpps            float64  `json:"mpps,omitempty"`
	OfferedMpps     float64  `json:"offered_mpps,omitempty"` // what the source sent, where the case counts it
	Packets         uint64   `json:"packets,omitempty"`
	Seconds         float64  `json:"seconds,omitempty"` // the window the packets were counted in
	CPUSeconds      float64  `json:"cpu_seconds"`       // the switching process, over WallSeconds
	WallSeconds     float64  `json:"wall_seconds"`
	CPUPercent      float64  `json:"cpu_percent"`       // of one core
	GuestCPUPercent float64  `json:"guest_cpu_percent"` // the guest testpmd's, same window
	PeakRSSMiB      float64  `json:"peak_rss_mib"`
	Latency         *Latency `json:"latency,omitempty"`
	Load1           float64  `json:"load1_at_start"`
	// Threads: where each thread of the switching process (Switch) and
	// of the guest testpmd (Guest) may run, read during the run.
	SwitchThreads string `json:"switch_threads"`
	GuestThreads  string `json:"guest_threads,omitempty"`
	Notes         string `json:"notes,omitempty"`
	Error         string `json:"error,omitempty"`
}

// bench is one invocation: options, the xvswitch binary, where logs go.
type bench struct {
	opt      options
	xvswitch string
	logDir   string
	log      io.Writer
}

// runOnce sets up case c on sys, starts the traffic, lets it settle for
// the warm-up, then measures for the duration: the rate (frames counted
// by the case's instrument), the latency, and the switching process's CPU
// time and peak RSS. Everything is torn down before it returns.
func (b *bench) runOnce(c Case, sys string, round int) Run {
	r := Run{System: sys, Round: round, Load1: loadAvg()[0]}
	work, err := os.MkdirTemp("", "xvs-bench-")
	if err != nil {
		r.Error = err.Error()
		return r
	}
	t := newRunT(fmt.Sprintf("%s/%s/%d", c.ID, sys, round), work, b.log)
	err = t.step(func() { b.measure(t, c, sys, &r) })
	t.finish()
	if err != nil {
		r.Error = err.Error()
		fmt.Fprintf(b.log, "    %s: %v (logs kept in %s and %s)\n", t.name, err, work, b.logDir)
		return r
	}
	if b.opt.keep {
		fmt.Fprintf(b.log, "    %s: work directory kept: %s\n", t.name, work)
	} else {
		os.RemoveAll(work)
	}
	return r
}

func (b *bench) measure(t *runT, c Case, sys string, r *Run) {
	tp := b.build(t, c, sys)
	tp.start()
	time.Sleep(b.opt.warmup)
	cpu0, err := cpuSeconds(tp.pid)
	if err != nil {
		t.Fatalf("switching process: %v", err)
	}
	gcpu0, _ := cpuSeconds(tp.guestPid)
	w0 := time.Now()
	switch c.Kind {
	case kindRate:
		n0, t0, err := tp.count()
		if err != nil {
			t.Fatalf("count: %v", err)
		}
		var o0, o1 uint64
		var ot0, ot1 time.Time
		if tp.offered != nil {
			if o0, ot0, err = tp.offered(); err != nil {
				t.Fatalf("offered: %v", err)
			}
		}
		time.Sleep(b.opt.duration)
		n1, t1, err := tp.count()
		if err != nil {
			t.Fatalf("count: %v", err)
		}
		if tp.offered != nil {
			if o1, ot1, err = tp.offered(); err != nil {
				t.Fatalf("offered: %v", err)
			}
			if s := ot1.Sub(ot0).Seconds(); s > 0 {
				r.OfferedMpps = float64(o1-o0) / s / 1e6
			}
		}
		r.Packets, r.Seconds = n1-n0, t1.Sub(t0).Seconds()
		if r.Seconds > 0 {
			r.Mpps = float64(r.Packets) / r.Seconds / 1e6
		}
	case kindLatency:
		l, err := tp.probe(b.opt.duration)
		if err != nil {
			t.Fatalf("latency: %v", err)
		}
		r.Latency = l
	case kindIdle:
		time.Sleep(b.opt.duration)
	}
	r.SwitchThreads = threadPlacement(tp.pid)
	if tp.guestPid > 0 {
		r.GuestThreads = threadPlacement(tp.guestPid)
	}
	cpu1, err := cpuSeconds(tp.pid)
	if err != nil {
		t.Fatalf("switching process gone after the measurement: %v", err)
	}
	r.WallSeconds = time.Since(w0).Seconds()
	r.CPUSeconds = cpu1 - cpu0
	r.CPUPercent = 100 * r.CPUSeconds / r.WallSeconds
	if gcpu1, err := cpuSeconds(tp.guestPid); err == nil {
		r.GuestCPUPercent = 100 * (gcpu1 - gcpu0) / r.WallSeconds
	}
	if r.PeakRSSMiB, err = peakRSSMiB(tp.pid); err != nil {
		t.Fatalf("%v", err)
	}
	if tp.notes != nil {
		r.Notes = tp.notes()
	}
	// Under traffic both switches poll flat out: a much smaller share of
	// the CPU means something else ran on it, and the rate shows that too.
	if c.Kind == kindRate && r.CPUPercent < 50 {
		r.Notes += fmt.Sprintf(" [contended: the switching process got %.0f%% of its CPU]", r.CPUPercent)
		if r.CPUPercent < 5 {
			// Starved or stuck? Say what its threads are doing.
			r.Notes += " [threads: " + threadStates(tp.pid) + "]"
		}
	}
}

// SysSummary is one system's results on one case.
type SysSummary struct {
	Runs       int      `json:"runs_ok"`
	BestMpps   float64  `json:"best_mpps,omitempty"`
	MedianMpps float64  `json:"median_mpps,omitempty"`
	CPUSeconds float64  `json:"median_cpu_seconds"`
	CPUPercent float64  `json:"median_cpu_percent"`
	PeakRSSMiB float64  `json:"peak_rss_mib"`
	Latency    *Latency `json:"latency,omitempty"` // the run with the lowest median
}

// Result is a case with its runs (alternated xvswitch, DPDK, xvswitch,
// DPDK, ...) and their summary.
type Result struct {
	Case
	Placement string     `json:"cpu_placement"`
	Runs      []Run      `json:"runs"`
	Xvswitch  SysSummary `json:"xvswitch"`
	DPDK      SysSummary `json:"dpdk"`
	// Ratio is xvswitch / DPDK: best Mpps (rate; higher is better),
	// median round trip (latency; lower is better), CPU (idle; lower is
	// better). 0 when either side has no result.
	Ratio float64 `json:"ratio"`
}

// runCase measures c on both systems, alternating them round by round.
func (b *bench) runCase(c Case, stop *atomic.Bool) Result {
	res := Result{Case: c, Placement: placement}
	for round := 1; round <= b.opt.rounds && !stop.Load(); round++ {
		for _, sys := range []string{sysXvswitch, sysDPDK} {
			if stop.Load() {
				break
			}
			r := b.runOnce(c, sys, round)
			if r.Error != "" {
				// The machine is shared: a process can be starved for
				// seconds. One retry; the failure stays on record.
				fmt.Fprintf(b.log, "  %-28s %-8s round %d: failed, retrying: %s\n", c.ID, sys, round, firstLine(r.Error))
				first := r.Error
				r = b.runOnce(c, sys, round)
				r.Notes = strings.TrimSpace(r.Notes + " (retried after: " + firstLine(first) + ")")
			}
			fmt.Fprintf(b.log, "  %-28s %-8s round %d: %s\n", c.ID, sys, round, r.brief(c.Kind))
			res.Runs = append(res.Runs, r)
		}
	}
	res.Xvswitch = summarize1(res.Runs, sysXvswitch)
	res.DPDK = summarize1(res.Runs, sysDPDK)
	x, d := res.Xvswitch, res.DPDK
	switch c.Kind {
	case kindRate:
		if d.BestMpps > 0 {
			res.Ratio = x.BestMpps / d.BestMpps
		}
	case kindLatency:
		if x.Latency != nil && d.Latency != nil && d.Latency.P50 > 0 {
			res.Ratio = x.Latency.P50 / d.Latency.P50
		}
	case kindIdle:
		if x.Runs > 0 && d.Runs > 0 && d.CPUPercent > 0 {
			res.Ratio = x.CPUPercent / d.CPUPercent
		}
	}
	return res
}

func (r Run) brief(kind string) string {
	if r.Error != "" {
		return "ERROR " + r.Error
	}
	s := ""
	switch kind {
	case kindRate:
		s = fmt.Sprintf("%.3f Mpps (%d frames in %.2f s)", r.Mpps, r.Packets, r.Seconds)
		if r.OfferedMpps > 0 {
			s += fmt.Sprintf(" of %.3f Mpps offered", r.OfferedMpps)
		}
	case kindLatency:
		s = fmt.Sprintf("p50 %.1f us p99 %.1f us (%d probes, %d lost)", r.Latency.P50, r.Latency.P99, r.Latency.Probes, r.Latency.Lost)
	}
	return fmt.Sprintf("%s guest cpu %.0f%%; cpu %.3f s (%.1f%%) rss %.1f MiB load %.1f %s", s, r.GuestCPUPercent, r.CPUSeconds, r.CPUPercent, r.PeakRSSMiB, r.Load1, r.Notes)
}

func summarize1(runs []Run, sys string) SysSummary {
	var s SysSummary
	var mpps, cpu, pct []float64
	for _, r := range runs {
		if r.System != sys || r.Error != "" {
			continue
		}
		s.Runs++
		mpps = append(mpps, r.Mpps)
		cpu = append(cpu, r.CPUSeconds)
		pct = append(pct, r.CPUPercent)
		s.PeakRSSMiB = max(s.PeakRSSMiB, r.PeakRSSMiB)
		if r.Latency != nil && r.Latency.Probes > 0 && (s.Latency == nil || r.Latency.P50 < s.Latency.P50) {
			s.Latency = r.Latency
		}
	}
	if s.Runs == 0 {
		return s
	}
	s.MedianMpps = median(mpps)
	for _, m := range mpps {
		s.BestMpps = max(s.BestMpps, m)
	}
	s.CPUSeconds, s.CPUPercent = median(cpu), median(pct)
	return s
}

func median(v []float64) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
