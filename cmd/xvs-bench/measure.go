package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/xvswitch/xvswitch/test/hostprobe"
)

// Run is one measurement of one system on one case.
type Run struct {
	System      string  `json:"system"`
	Round       int     `json:"round"`
	Mpps        float64 `json:"mpps,omitempty"`
	OfferedMpps float64 `json:"offered_mpps,omitempty"` // what the source sent, where the case counts it
	Packets     uint64  `json:"packets,omitempty"`
	Seconds     float64 `json:"seconds,omitempty"` // the window the packets were counted in
	CPUSeconds  float64 `json:"cpu_seconds"`       // the switching process, over WallSeconds
	WallSeconds float64 `json:"wall_seconds"`
	CPUPercent  float64 `json:"cpu_percent"` // of one core
	// NsPerFrame is the switching process's CPU time per counted frame:
	// its CPU share over the window divided by the frame rate (rates).
	NsPerFrame      float64  `json:"cpu_ns_per_frame,omitempty"`
	GuestCPUPercent float64  `json:"guest_cpu_percent"` // the guest testpmd's, same window
	PeakRSSMiB      float64  `json:"peak_rss_mib"`
	Latency         *Latency `json:"latency,omitempty"`
	Load1           float64  `json:"load1_at_start"`
	// CrossCPU: how far apart the guest's and the switch's CPUs were
	// just before and just after the run (hoststate.go).
	CrossCPU CrossCPU `json:"cross_cpu"`
	// Steal: what the hypervisor took of the guest's and the switch's
	// CPUs during the measured window (steal.go).
	Steal *Steal `json:"steal,omitempty"`
	// WindowDrops: the switch's drop counters that moved in the measured
	// window (read at its start and end, drops.go); WindowDropsTotal
	// their sum without the case's by-design drop and the AF_XDP RX ring's
	// (which DPDK does not report: ringFullDrop).
	WindowDrops      Drops  `json:"window_drops"`
	WindowDropsTotal uint64 `json:"window_drops_total"`
	// PathStart and PathEnd (xvswitch): its ports' path counters, queue
	// counters and kernel counters at the window's start and end
	// (zerocopy.go); PathWindow their increase: which path the frames
	// in the window took.
	PathStart  Paths `json:"path_counters_start,omitempty"`
	PathEnd    Paths `json:"path_counters_end,omitempty"`
	PathWindow Paths `json:"path_counters_window,omitempty"`
	// Threads: where each thread of the switching process (Switch) and
	// of the guest testpmd (Guest) may run, read during the run.
	SwitchThreads string `json:"switch_threads"`
	GuestThreads  string `json:"guest_threads,omitempty"`
	// Placement: every thread of the switching process over the window,
	// and for xvswitch whether its worker had its CPU to itself.
	Placement *Placement `json:"switch_placement,omitempty"`
	// Profiled: an extra run whose worker perf sampled (-profile); not
	// in the summaries.
	Profiled bool     `json:"profiled,omitempty"`
	Profile  *Profile `json:"profile,omitempty"`
	Notes    string   `json:"notes,omitempty"`
	Error    string   `json:"error,omitempty"`
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
func (b *bench) runOnce(c Case, sys string, round int, profile bool) Run {
	r := Run{System: sys, Round: round, Load1: loadAvg()[0], Profiled: profile}
	work, err := os.MkdirTemp("", "xvs-bench-")
	if err != nil {
		r.Error = err.Error()
		return r
	}
	t := newRunT(fmt.Sprintf("%s/%s/%d", c.ID, sys, round), work, b.log)
	r.CrossCPU.BeforeNs = b.crossCPU(&r)
	err = t.step(func() { b.measure(t, c, sys, &r) })
	t.finish()
	r.CrossCPU.AfterNs = b.crossCPU(&r)
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
	// The window's start: CPU times, threads, drops, then the counters.
	cpu0, err := cpuSeconds(tp.pid)
	if err != nil {
		t.Fatalf("switching process: %v", err)
	}
	gcpu0, _ := cpuSeconds(tp.guestPid)
	threads0, err := readThreads(tp.pid)
	if err != nil {
		t.Fatalf("switching process's threads: %v", err)
	}
	drops0, err := tp.drops()
	if err != nil {
		t.Fatalf("drops: %v", err)
	}
	if tp.paths != nil {
		if r.PathStart, err = tp.paths(); err != nil {
			t.Fatalf("path counters: %v", err)
		}
	}
	var perf *perfRecording
	if r.Profiled {
		perf = b.startProfile(t, tp, threads0, r)
	}
	steal0, _ := hostprobe.StealMs()
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
		window := b.opt.duration
		if r.Profiled {
			window = b.opt.profileDuration
		}
		time.Sleep(window)
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
		if r.Packets == 0 {
			// Nothing to measure: a closed loop whose primed frames
			// were lost before the switch's ports were up, or traffic
			// that never started. A failure, so the run is retried.
			t.Fatalf("no frames counted in the %.2f s window", r.Seconds)
		}
	case kindLatency:
		l, err := tp.probe(b.opt.probes, max(30*time.Second, 10*b.opt.duration))
		if err != nil {
			t.Fatalf("latency: %v", err)
		}
		if l.Probes < b.opt.probes {
			r.Notes += fmt.Sprintf(" [only %d of %d probes came back in time]", l.Probes, b.opt.probes)
		}
		r.Latency = l
	case kindIdle:
		time.Sleep(b.opt.duration)
	}
	// The window's end, in the reverse order: the drops window holds
	// the count window.
	r.Steal = stealSince(steal0)
	if perf != nil {
		if err := perf.stop(); err != nil {
			r.Profile = &Profile{TID: perf.tid, Error: err.Error()}
			perf = nil
		}
	}
	if tp.paths != nil {
		if r.PathEnd, err = tp.paths(); err != nil {
			t.Fatalf("path counters: %v", err)
		}
		r.PathWindow = r.PathEnd.since(r.PathStart)
	}
	drops1, err := tp.drops()
	if err != nil {
		t.Fatalf("drops: %v", err)
	}
	r.WindowDrops = drops1.since(drops0)
	r.WindowDropsTotal = r.WindowDrops.total(c.ByDesignDrop, ringFullDrop)
	threads1, err := readThreads(tp.pid)
	if err != nil {
		t.Fatalf("switching process's threads after the window: %v", err)
	}
	cpu1, err := cpuSeconds(tp.pid)
	if err != nil {
		t.Fatalf("switching process gone after the measurement: %v", err)
	}
	r.WallSeconds = time.Since(w0).Seconds()
	p := placementOf(tp.pid, threads0, threads1, tp.workerCPUs)
	r.Placement = &p
	if ok := p.RuntimeOffWorkerCPU; ok != nil && !*ok {
		r.Notes += " [worker CPU shared: " + violationSummary(p.Violations) + "]"
	}
	r.SwitchThreads = threadPlacement(tp.pid)
	if tp.guestPid > 0 {
		r.GuestThreads = threadPlacement(tp.guestPid)
	}
	r.CPUSeconds = cpu1 - cpu0
	r.CPUPercent = 100 * r.CPUSeconds / r.WallSeconds
	if c.Kind == kindRate && r.Mpps > 0 {
		// CPU seconds per second over frames per second: the two
		// windows differ by the counters' reads, the rates do not.
		r.NsPerFrame = 1e9 * (r.CPUSeconds / r.WallSeconds) / (r.Mpps * 1e6)
	}
	if gcpu1, err := cpuSeconds(tp.guestPid); err == nil {
		r.GuestCPUPercent = 100 * (gcpu1 - gcpu0) / r.WallSeconds
	}
	if r.PeakRSSMiB, err = peakRSSMiB(tp.pid); err != nil {
		t.Fatalf("%v", err)
	}
	if perf != nil {
		r.Profile = perf.report(filepath.Join(b.opt.profile, profileName(c)), profileHeader(c, r), b.xvswitch)
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
	r.Notes = strings.TrimSpace(r.Notes)
}

// startProfile starts perf on xvswitch's worker thread for the window.
// Without one worker thread to sample, or without perf, the run goes on
// unprofiled and says why.
func (b *bench) startProfile(t *runT, tp *topo, threads map[int]threadSample, r *Run) *perfRecording {
	tids := workerThreads(tp.pid, threads, tp.workerCPUs)
	if len(tids) != 1 {
		r.Profile = &Profile{Error: fmt.Sprintf("want one worker thread pinned to CPU %s, found %d", cpuListString(tp.workerCPUs), len(tids))}
		return nil
	}
	perf, err := startPerf(t.TempDir(), tids[0], guestCPU)
	if err != nil {
		r.Profile = &Profile{TID: tids[0], Error: err.Error()}
		return nil
	}
	t.Cleanup(perf.kill) // a run that fails in its window
	return perf
}

// profileHeader is what a profile file says about the run it comes from.
func profileHeader(c Case, r *Run) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# xvs-bench CPU profile of xvswitch's worker thread: %s (scenario %d %s, %d B, %s ring", c.ID, c.Scenario, c.Title, c.Size, c.Ring)
	if c.Mode != "" {
		fmt.Fprintf(&b, ", %s", c.Mode)
	}
	fmt.Fprintf(&b, ")\n# perf record -F %d -g -t <worker tid> over the measured window (%.1f s), an extra run left out of the table's medians and bests\n", perfHz, r.WallSeconds)
	if c.Kind == kindRate {
		fmt.Fprintf(&b, "# rate during the profiled run: %.2f Mpps; the switching process used %.0f%% of a core\n", r.Mpps, r.CPUPercent)
	}
	return b.String()
}

// Result is a case with its runs (alternated xvswitch, DPDK, xvswitch,
// DPDK, ...) and their summary.
type Result struct {
	Case
	Placement string     `json:"cpu_placement"`
	Runs      []Run      `json:"runs"`
	Xvswitch  SysSummary `json:"xvswitch"`
	DPDK      SysSummary `json:"dpdk"`
	// XvswitchZerocopy is the zero-copy system's (scenarios 4 and 5).
	XvswitchZerocopy *SysSummary `json:"xvswitch_zerocopy,omitempty"`
	// RatioMedian and RatioBest are xvswitch / DPDK of the medians and
	// of the bests (ratios, stats.go): Mpps for a rate (higher is
	// better), p99 round trip for latency and CPU for idle (lower is
	// better). 0 when either side has no result.
	RatioMedian float64 `json:"ratio_median"`
	RatioBest   float64 `json:"ratio_best"`
	// Profile is the extra profiled xvswitch run's (-profile).
	Profile *Profile `json:"profile,omitempty"`
}

// roundsOf is how many rounds case c runs: latency's windows are counted
// in probes and take their own number of rounds.
func (o options) roundsOf(c Case) int {
	if c.Kind == kindLatency {
		return o.latencyRounds
	}
	return o.rounds
}

// runCase measures c on both systems, alternating them round by round,
// then (-profile, scenarios 1-3 and 5) profiles one more xvswitch run.
func (b *bench) runCase(c Case, stop *atomic.Bool) Result {
	res := Result{Case: c, Placement: placement(b.opt.runtimeCPUs, b.opt.keepBusy)}
	run := func(sys string, round int, profile bool) Run {
		r := b.runOnce(c, sys, round, profile)
		if r.Error != "" {
			// The machine is shared: a process can be starved for
			// seconds. One retry; the failure stays on record.
			fmt.Fprintf(b.log, "  %-28s %-8s round %d: failed, retrying: %s\n", c.ID, sys, round, firstLine(r.Error))
			first := r.Error
			r = b.runOnce(c, sys, round, profile)
			r.Notes = strings.TrimSpace(r.Notes + " (retried after: " + firstLine(first) + ")")
		}
		fmt.Fprintf(b.log, "  %-28s %-8s round %d: %s\n", c.ID, sys, round, r.brief(c.Kind))
		return r
	}
	for round := 1; round <= b.opt.roundsOf(c) && !stop.Load(); round++ {
		for _, sys := range c.systems() {
			if stop.Load() {
				break
			}
			res.Runs = append(res.Runs, run(sys, round, false))
		}
	}
	if b.opt.profile != "" && profiled(c.Scenario) && !stop.Load() {
		r := run(sysXvswitch, 0, true)
		res.Runs = append(res.Runs, r)
		res.Profile = r.Profile
		if res.Profile == nil && r.Error != "" {
			res.Profile = &Profile{Error: "the profiled run failed: " + firstLine(r.Error)}
		}
	}
	res.summarize()
	return res
}

// summarize fills in the systems' summaries and the ratios from the runs.
func (res *Result) summarize() {
	res.Xvswitch = summarize1(res.Runs, sysXvswitch)
	res.DPDK = summarize1(res.Runs, sysDPDK)
	res.XvswitchZerocopy = nil
	if res.has(sysXvswitchZerocopy) {
		s := summarize1(res.Runs, sysXvswitchZerocopy)
		res.XvswitchZerocopy = &s
	}
	res.RatioMedian, res.RatioBest = ratios(res.Kind, res.Xvswitch, res.DPDK)
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
		s = fmt.Sprintf("p50 %.1f us p99 %.1f us p99.9 %.1f us (%d probes, %d lost)", r.Latency.P50, r.Latency.P99, r.Latency.P999, r.Latency.Probes, r.Latency.Lost)
	}
	s += fmt.Sprintf(" window drops %d", r.WindowDropsTotal)
	if c := r.CrossCPU; c.BeforeNs > 0 || c.AfterNs > 0 {
		s += fmt.Sprintf("; CPUs %.0f/%.0f ns apart", c.BeforeNs, c.AfterNs)
	}
	if st := r.Steal; st != nil {
		s += fmt.Sprintf("; steal %.0f/%.0f ms", st.GuestMs, st.SwitchMs)
	}
	if p := r.Placement; p != nil && p.RuntimeOffWorkerCPU != nil {
		s += fmt.Sprintf("; runtime off worker CPU: %v (%.3f s CPU)", *p.RuntimeOffWorkerCPU, p.runtimeCPUSeconds())
	}
	if pb := r.PathWindow.perBurst(); pb != "" {
		s += "; frames per burst: " + pb
	}
	if st := r.PathWindow.streamed(); st != "" {
		s += "; streamed: " + st
	}
	if r.Profile != nil {
		if r.Profile.Error != "" {
			s += "; profile: " + r.Profile.Error
		} else {
			s += fmt.Sprintf("; profile: %d samples in %s", r.Profile.Samples, r.Profile.File)
		}
	}
	return fmt.Sprintf("%s guest cpu %.0f%%; cpu %.3f s (%.1f%%) rss %.1f MiB load %.1f %s", s, r.GuestCPUPercent, r.CPUSeconds, r.CPUPercent, r.PeakRSSMiB, r.Load1, r.Notes)
}
