package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"
)

// Report is everything a run measured, as written to bench.json.
type Report struct {
	Date    string `json:"date"`
	Host    Host   `json:"host"`
	Command string `json:"command"`
	Smoke   bool   `json:"smoke"`
	Rounds  int    `json:"rounds"`
	// LatencyRounds and Probes: scenario 6's rounds and round trips per run.
	LatencyRounds int        `json:"latency_rounds"`
	Probes        int        `json:"probes_per_run"`
	Warmup        string     `json:"warmup"`
	Duration      string     `json:"duration"`
	LoadStart     [3]float64 `json:"load_average_start"`
	LoadEnd       [3]float64 `json:"load_average_end"`
	Elapsed       string     `json:"elapsed"`
	Placement     string     `json:"cpu_placement"`
	// XvswitchLaunch is how the bench starts xvswitch (its CPU placement).
	XvswitchLaunch string   `json:"xvswitch_launch"`
	Guest          string   `json:"guest_config"`
	Results        []Result `json:"results"`
	Failed         int      `json:"failed_runs"`
	// Interrupted: the run was stopped early (Ctrl-C); later cases are missing.
	Interrupted bool     `json:"interrupted,omitempty"`
	Files       []string `json:"-"`
}

// Host describes the machine.
type Host struct {
	Kernel   string `json:"kernel"`
	CPUModel string `json:"cpu_model"`
	CPUs     int    `json:"cpus"`
	MemTotal string `json:"mem_total"`
	Go       string `json:"go"`
	DPDK     string `json:"dpdk"`
}

const guestConfig = "DPDK testpmd with net_virtio_user: mrg_rxbuf=1, in_order=0, queue_size=4096 (like a QEMU guest's virtio-net), 512 RX buffers posted (testpmd's default), the whole ring (--rxd 4096) for NIC -> VM; " +
	"DPDK switch: testpmd with net_vhost (and net_af_xdp on the veth), --rxd/--txd 1024; " +
	"xvswitch: one worker, default --idle-after; NIC: veth (AF_XDP copy mode), MTU 1600"

// memoryNote says what pages the testpmds' memory (the guests' memory,
// which the switches map) is made of.
func memoryNote(hugeDir string) string {
	if hugeDir == "" {
		return "; testpmd memory (the guests' memory too): 4 KiB pages (--no-huge)"
	}
	return "; testpmd memory (the guests' memory too): 2 MiB hugepages from " + hugeDir + " (-huge-dir)"
}

func newReport(o options) *Report {
	r := &Report{
		Date:           time.Now().UTC().Format("2006-01-02 15:04 MST"),
		Host:           hostInfo(),
		Command:        "xvs-bench " + strings.Join(o.args, " "),
		Smoke:          o.smoke,
		Rounds:         o.rounds,
		LatencyRounds:  o.latencyRounds,
		Probes:         o.probes,
		XvswitchLaunch: xvswitchLaunch(o.runtimeCPUs, o.idleAfter),
		Warmup:         o.warmup.String(),
		Duration:       o.duration.String(),
		LoadStart:      loadAvg(),
		Placement:      placement(o.runtimeCPUs, o.keepBusy),
		Guest:          guestConfig,
	}
	if o.idleAfter != "" {
		r.Guest = strings.Replace(r.Guest, "default --idle-after", "--idle-after "+o.idleAfter, 1)
	}
	r.Guest += memoryNote(o.hugeDir)
	return r
}

func hostInfo() Host {
	h := Host{CPUs: runtime.NumCPU(), Go: runtime.Version()}
	if out, err := exec.Command("uname", "-r").Output(); err == nil {
		h.Kernel = strings.TrimSpace(string(out))
	}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				h.CPUModel = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "MemTotal:"); ok {
				h.MemTotal = strings.TrimSpace(v)
			}
		}
	}
	if out, err := exec.Command("dpkg-query", "-W", "-f", "${Version}", "dpdk-dev").Output(); err == nil {
		h.DPDK = strings.TrimSpace(string(out))
	}
	return h
}

func (r *Report) add(res Result) {
	for _, run := range res.Runs {
		if run.Error != "" {
			r.Failed++
		}
	}
	r.Results = append(r.Results, res)
}

func (r *Report) finish(elapsed time.Duration) {
	r.LoadEnd = loadAvg()
	r.Elapsed = elapsed.Round(time.Second).String()
}

// write writes bench.json, bench.md and bench.png into dir.
func (r *Report) write(dir string) error {
	js, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	files := map[string][]byte{"bench.json": append(js, '\n'), "bench.md": []byte(r.markdown())}
	png, err := r.chart()
	if err != nil {
		return fmt.Errorf("chart: %w", err)
	}
	files["bench.png"] = png
	for _, name := range []string{"bench.json", "bench.md", "bench.png"} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, files[name], 0o644); err != nil {
			return err
		}
		r.Files = append(r.Files, p)
	}
	return nil
}

// markdown renders the results table and the notes a reader needs.
func (r *Report) markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# xvswitch vs DPDK: %s\n\n", r.Date)
	fmt.Fprintf(&b, "- Machine: %s, %d CPUs, %s, kernel %s; Go %s; DPDK %s\n", r.Host.CPUModel, r.Host.CPUs, r.Host.MemTotal, r.Host.Kernel, r.Host.Go, r.Host.DPDK)
	fmt.Fprintf(&b, "- Command: `%s` (%d rounds of xvswitch then DPDK per case, %s warm-up, %s measured each; latency: %d rounds of %d round trips each; took %s)\n", r.Command, r.Rounds, r.Warmup, r.Duration, r.LatencyRounds, r.Probes, r.Elapsed)
	fmt.Fprintf(&b, "- Load average at start %.2f %.2f %.2f, at end %.2f %.2f %.2f\n", r.LoadStart[0], r.LoadStart[1], r.LoadStart[2], r.LoadEnd[0], r.LoadEnd[1], r.LoadEnd[2])
	fmt.Fprintf(&b, "- CPU placement (both systems): %s\n", r.Placement)
	if r.XvswitchLaunch != "" {
		fmt.Fprintf(&b, "- xvswitch started as: %s\n", r.XvswitchLaunch)
	}
	fmt.Fprintf(&b, "- Configuration: %s\n", r.Guest)
	if r.Interrupted {
		b.WriteString("- **Interrupted**: the run was stopped early; the cases after the last row were not measured\n")
	}
	b.WriteString("\n")
	b.WriteString("Each system ran every case in alternated rounds (xvswitch, DPDK, xvswitch, DPDK, ...). For each system the table gives the median and the best of its runs (rates: every run in brackets, in run order; latency: the median of the runs' p50, p99 and p99.9, and the lowest p99), and the ratios xvswitch / DPDK of the medians and of the bests (rates: higher is better; latency: p99 round trip, lower is better; idle: CPU, lower is better). Window drops are the frames the switch itself counted as dropped between the start and the end of the measured window (xvswitch: its drop reasons and its AF_XDP sockets' rx_dropped and invalid descriptors; DPDK: its ports' RX-missed, RX-errors, RX-nombuf and TX-errors, and its forwarding engine's TX-dropped; neither counts frames a full AF_XDP RX ring refused, which DPDK's af_xdp PMD does not report: xvswitch's are in window_drops in bench.json), median of the runs (most in brackets); warm-up drops do not count. CPU is the switching process's CPU time over the window (median of the runs) and its share of one core; RSS is its peak resident set (VmHWM).\n\n")
	b.WriteString("| # | Scenario | Frame | Ring | xvswitch median | xvswitch best | DPDK median | DPDK best | xvs/DPDK median | xvs/DPDK best | window drops xvswitch / DPDK | xvswitch CPU | DPDK CPU | xvswitch peak RSS | DPDK peak RSS |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, res := range r.Results {
		title := res.Title
		if res.Mode != "" {
			title += " (" + res.Mode + ")"
		}
		fmt.Fprintf(&b, "| %d | %s | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
			res.Scenario, title, res.Size, res.Ring,
			medianCell(res, sysXvswitch), bestCell(res, sysXvswitch), medianCell(res, sysDPDK), bestCell(res, sysDPDK),
			ratioCell(res.Kind, res.RatioMedian), ratioCell(res.Kind, res.RatioBest), dropsCell(res),
			cpuCell(res.Xvswitch), cpuCell(res.DPDK), rssCell(res.Xvswitch), rssCell(res.DPDK))
	}
	var errs []string
	for _, res := range r.Results {
		for _, run := range res.Runs {
			if run.Error != "" {
				errs = append(errs, fmt.Sprintf("- %s %s round %d: %s", res.ID, run.System, run.Round, firstLine(run.Error)))
			}
		}
	}
	if len(errs) > 0 {
		b.WriteString("\nFailed runs:\n\n" + strings.Join(errs, "\n") + "\n")
	}
	b.WriteString("\nInstruments (the same for both systems):\n\n")
	seen := map[int]bool{}
	for _, res := range r.Results {
		if !seen[res.Scenario] {
			seen[res.Scenario] = true
			fmt.Fprintf(&b, "- %d %s: %s", res.Scenario, res.Title, res.Instrument)
			if res.ByDesignDrop != "" {
				fmt.Fprintf(&b, " (xvswitch's %s drops are this case's design, left out of its window drops)", res.ByDesignDrop)
			}
			b.WriteString("\n")
		}
	}
	b.WriteString(r.zerocopySection())
	b.WriteString(r.burstSection())
	b.WriteString(r.placementSection())
	b.WriteString(r.hostStateSection())
	b.WriteString(r.stealSection())
	b.WriteString(r.profileSection())
	return b.String()
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}

// summary is sys's summary of res.
func (res Result) summary(sys string) SysSummary {
	switch sys {
	case sysDPDK:
		return res.DPDK
	case sysXvswitchZerocopy:
		if res.XvswitchZerocopy != nil {
			return *res.XvswitchZerocopy
		}
		return SysSummary{}
	}
	return res.Xvswitch
}

// medianCell is one system's median result for a case, with its runs.
func medianCell(res Result, sys string) string {
	s := res.summary(sys)
	if s.Runs == 0 {
		return "failed"
	}
	switch res.Kind {
	case kindLatency:
		l := s.Latency
		if l == nil {
			return "no probes"
		}
		return fmt.Sprintf("p50 %.0f, p99 %.0f, p99.9 %.0f µs (p99s %s)", l.MedianP50, l.MedianP99, l.MedianP999, joinFloats(l.P99s, "%.0f"))
	case kindIdle:
		return fmt.Sprintf("%.2f%%", s.CPUPercent)
	}
	var runs, offered []float64
	for _, r := range res.Runs {
		if r.System == sys && r.Error == "" && !r.Profiled {
			runs = append(runs, r.Mpps)
			if r.OfferedMpps > 0 {
				offered = append(offered, r.OfferedMpps)
			}
		}
	}
	out := fmt.Sprintf("**%.2f Mpps** (%s)", s.MedianMpps, joinFloats(runs, "%.2f"))
	if len(offered) > 0 {
		out += fmt.Sprintf(" of %.2f offered", median(offered))
	}
	return out
}

// bestCell is one system's best result for a case.
func bestCell(res Result, sys string) string {
	s := res.summary(sys)
	if s.Runs == 0 {
		return "-"
	}
	switch res.Kind {
	case kindLatency:
		if s.Latency == nil {
			return "-"
		}
		return fmt.Sprintf("p99 %.0f µs", s.Latency.BestP99)
	case kindIdle:
		return fmt.Sprintf("%.2f%%", s.BestCPUPercent)
	}
	return fmt.Sprintf("%.2f Mpps", s.BestMpps)
}

func joinFloats(v []float64, format string) string {
	parts := make([]string, len(v))
	for i, x := range v {
		parts[i] = fmt.Sprintf(format, x)
	}
	return strings.Join(parts, ", ")
}

func ratioCell(kind string, ratio float64) string {
	if ratio == 0 {
		return "-"
	}
	if kind == kindIdle && ratio < 0.01 {
		return fmt.Sprintf("%.4fx", ratio)
	}
	return fmt.Sprintf("%.2fx", ratio)
}

// dropsCell is both systems' window drops: median (most).
func dropsCell(res Result) string {
	read := map[string]bool{} // runs before window drops were read have none
	for _, r := range res.Runs {
		if r.WindowDrops != nil {
			read[r.System] = true
		}
	}
	one := func(sys string) string {
		s := res.summary(sys)
		if s.Runs == 0 || !read[sys] {
			return "-"
		}
		if s.MaxWindowDrops == s.MedianWindowDrops {
			return fmt.Sprint(s.MedianWindowDrops)
		}
		return fmt.Sprintf("%d (%d)", s.MedianWindowDrops, s.MaxWindowDrops)
	}
	return one(sysXvswitch) + " / " + one(sysDPDK)
}

func cpuCell(s SysSummary) string {
	if s.Runs == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f s (%.1f%%)", s.CPUSeconds, s.CPUPercent)
}

func rssCell(s SysSummary) string {
	if s.Runs == 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f MiB", s.PeakRSSMiB)
}

// placementSection says whether xvswitch's worker had its CPU to itself
// in every run, and what broke it where it did not.
func (r *Report) placementSection() string {
	var runs, ok int
	var rt []float64
	var bad []string
	for _, res := range r.Results {
		for _, run := range res.Runs {
			p := run.Placement
			if run.System == sysDPDK || run.Error != "" || p == nil || p.RuntimeOffWorkerCPU == nil {
				continue
			}
			runs++
			rt = append(rt, p.runtimeCPUSeconds())
			if *p.RuntimeOffWorkerCPU {
				ok++
			} else if len(bad) < 10 {
				bad = append(bad, fmt.Sprintf("- %s round %d: %s", res.ID, run.Round, violationSummary(p.Violations)))
			}
		}
	}
	if runs == 0 {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\nThread placement: xvswitch's worker thread had its CPU to itself (no other thread of the process allowed on it, or last seen on it, at the window's start and end: /proc/<pid>/task/*/status Cpus_allowed_list and stat field 39) in %d of %d runs; its other threads (the Go runtime) used %.3f s of CPU per window (median). Every thread of both switches, per run: switch_placement in bench.json.\n", ok, runs, median(rt))
	if len(bad) > 0 {
		b.WriteString("\n" + strings.Join(bad, "\n") + "\n")
	}
	return b.String()
}

// modulePrefix is left out of the functions' names in the table.
const modulePrefix = "github.com/xvswitch/xvswitch/"

// profileSection lists the top functions of each profiled case's worker.
func (r *Report) profileSection() string {
	var b strings.Builder
	for _, res := range r.Results {
		p := res.Profile
		if p == nil {
			continue
		}
		if b.Len() == 0 {
			fmt.Fprintf(&b, "\n## Where xvswitch's worker spends its time\n\nperf record -F %d -g -t <worker tid> over the window of one extra xvswitch run per case (not in the table), `perf report --no-children`: the top %d functions by self share of the worker's samples. The whole reports, with call chains: the profile-*.txt files next to bench.json.\n\n", perfHz, profileTopN)
		}
		if p.Error != "" {
			fmt.Fprintf(&b, "- **%s**: no profile: %s\n", res.ID, p.Error)
			continue
		}
		var rate string
		for _, run := range res.Runs {
			if run.Profiled && run.Error == "" {
				rate = fmt.Sprintf("%.2f Mpps profiled, ", run.Mpps)
			}
		}
		var top []string
		for _, e := range p.Top {
			top = append(top, fmt.Sprintf("%.1f%% `%s`", e.SelfPercent, strings.TrimPrefix(e.Symbol, modulePrefix)))
		}
		fmt.Fprintf(&b, "- **%s** (%s%d samples, %s): %s\n", res.ID, rate, p.Samples, p.File, strings.Join(top, ", "))
	}
	return b.String()
}
