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
	Date      string     `json:"date"`
	Host      Host       `json:"host"`
	Command   string     `json:"command"`
	Smoke     bool       `json:"smoke"`
	Rounds    int        `json:"rounds"`
	Warmup    string     `json:"warmup"`
	Duration  string     `json:"duration"`
	LoadStart [3]float64 `json:"load_average_start"`
	LoadEnd   [3]float64 `json:"load_average_end"`
	Elapsed   string     `json:"elapsed"`
	Placement string     `json:"cpu_placement"`
	Guest     string     `json:"guest_config"`
	Results   []Result   `json:"results"`
	Failed    int        `json:"failed_runs"`
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

const guestConfig = "DPDK testpmd with net_virtio_user: mrg_rxbuf=1, in_order=0, queue_size=4096 (like a QEMU guest's virtio-net); " +
	"DPDK switch: testpmd with net_vhost (and net_af_xdp on the veth), --rxd/--txd 1024; " +
	"xvswitch: one worker, default --idle-after; NIC: veth (AF_XDP copy mode), MTU 1600"

func newReport(o options) *Report {
	return &Report{
		Date:      time.Now().UTC().Format("2006-01-02 15:04 MST"),
		Host:      hostInfo(),
		Command:   "xvs-bench " + strings.Join(o.args, " "),
		Smoke:     o.smoke,
		Rounds:    o.rounds,
		Warmup:    o.warmup.String(),
		Duration:  o.duration.String(),
		LoadStart: loadAvg(),
		Placement: placement,
		Guest:     guestConfig,
	}
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
	fmt.Fprintf(&b, "- Command: `%s` (%d rounds of xvswitch then DPDK per case, %s warm-up, %s measured each; took %s)\n", r.Command, r.Rounds, r.Warmup, r.Duration, r.Elapsed)
	fmt.Fprintf(&b, "- Load average at start %.2f %.2f %.2f, at end %.2f %.2f %.2f\n", r.LoadStart[0], r.LoadStart[1], r.LoadStart[2], r.LoadEnd[0], r.LoadEnd[1], r.LoadEnd[2])
	fmt.Fprintf(&b, "- CPU placement (both systems): %s\n", r.Placement)
	fmt.Fprintf(&b, "- Configuration: %s\n", r.Guest)
	if r.Interrupted {
		b.WriteString("- **Interrupted**: the run was stopped early; the cases after the last row were not measured\n")
	}
	b.WriteString("\n")
	b.WriteString("Rates are the best run of each system (all runs in brackets); ratio = xvswitch / DPDK (for latency: median round trip, lower is better; idle: CPU, lower is better). CPU is the switching process's CPU time over the measured window (median of the runs) and its share of one core; RSS is its peak resident set (VmHWM).\n\n")
	b.WriteString("| # | Scenario | Frame | Ring | xvswitch | DPDK | xvs/DPDK | xvswitch CPU | DPDK CPU | xvswitch peak RSS | DPDK peak RSS |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, res := range r.Results {
		title := res.Title
		if res.Mode != "" {
			title += " (" + res.Mode + ")"
		}
		fmt.Fprintf(&b, "| %d | %s | %d | %s | %s | %s | %s | %s | %s | %s | %s |\n",
			res.Scenario, title, res.Size, res.Ring,
			cell(res, sysXvswitch), cell(res, sysDPDK), ratioCell(res),
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
			fmt.Fprintf(&b, "- %d %s: %s\n", res.Scenario, res.Title, res.Instrument)
		}
	}
	return b.String()
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}

// cell is one system's result for a case.
func cell(res Result, sys string) string {
	s := res.Xvswitch
	if sys == sysDPDK {
		s = res.DPDK
	}
	if s.Runs == 0 {
		return "failed"
	}
	switch res.Kind {
	case kindLatency:
		l := s.Latency
		if l == nil {
			return "no probes"
		}
		return fmt.Sprintf("p50 %.0f µs, p99 %.0f µs, p99.9 %.0f µs", l.P50, l.P99, l.P999)
	case kindIdle:
		return "-"
	}
	var runs []string
	for _, r := range res.Runs {
		if r.System == sys && r.Error == "" {
			runs = append(runs, fmt.Sprintf("%.2f", r.Mpps))
		}
	}
	out := fmt.Sprintf("**%.2f Mpps** (%s)", s.BestMpps, strings.Join(runs, ", "))
	var offered []string
	for _, r := range res.Runs {
		if r.System == sys && r.Error == "" && r.OfferedMpps > 0 {
			offered = append(offered, fmt.Sprintf("%.2f", r.OfferedMpps))
		}
	}
	if len(offered) > 0 {
		out += " of " + strings.Join(offered, ", ") + " offered"
	}
	return out
}

func ratioCell(res Result) string {
	if res.Ratio == 0 {
		return "-"
	}
	if res.Kind == kindIdle && res.Ratio < 0.01 {
		return fmt.Sprintf("%.4fx", res.Ratio)
	}
	return fmt.Sprintf("%.2fx", res.Ratio)
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
