package main

import (
	"fmt"
	"strings"
)

// stealLimit is the share of a run's window the hypervisor may have taken
// of either CPU for the run to count as clean: 1%, 20 ms of a 2 s window
// (/proc/stat counts steal in steps of 10 ms).
const stealLimit = 0.01

// clean says whether run's steal time was recorded and stayed within
// stealLimit of its window on both CPUs.
func (run Run) clean() bool {
	st := run.Steal
	if st == nil || run.WallSeconds <= 0 {
		return false
	}
	limit := stealLimit * run.WallSeconds * 1000
	return st.GuestMs <= limit && st.SwitchMs <= limit
}

// stealShare is the larger of the two CPUs' steal time over run's window,
// as a share of it.
func (run Run) stealShare() float64 {
	if run.Steal == nil || run.WallSeconds <= 0 {
		return 0
	}
	return max(run.Steal.GuestMs, run.Steal.SwitchMs) / (run.WallSeconds * 1000)
}

// stealSection compares the systems' rates on the runs the hypervisor
// left alone (steal.go), beside how much it took from the others.
func (r *Report) stealSection() string {
	var rows []string
	cleanRuns, runs := 0, 0
	var shares []float64
	for _, res := range r.Results {
		if res.Kind != kindRate {
			continue
		}
		var xc, dc []float64
		stolen := map[string]int{}
		for _, run := range res.Runs {
			if run.Error != "" || run.Profiled || run.Steal == nil {
				continue
			}
			runs++
			shares = append(shares, run.stealShare())
			if !run.clean() {
				stolen[run.System]++
				continue
			}
			cleanRuns++
			switch run.System {
			case sysXvswitch:
				xc = append(xc, run.Mpps)
			case sysDPDK:
				dc = append(dc, run.Mpps)
			}
		}
		title := res.Title
		if res.Mode != "" {
			title += " (" + res.Mode + ")"
		}
		rows = append(rows, fmt.Sprintf("| %d | %s | %d | %s | %s | %s | %s | %d / %d |", res.Scenario, title, res.Size, res.Ring,
			stateCell(xc), stateCell(dc), stateRatio(xc, dc), stolen[sysXvswitch], stolen[sysDPDK]))
	}
	if runs == 0 {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n## Steal time: what the hypervisor took of the two CPUs\n\nOver every run's measured window the bench read the steal time of CPU %d and CPU %d (/proc/stat, in steps of 10 ms: the time the host ran something else while the vCPU had work; steal.go). A run counts as clean when it stayed within %.0f%% of the window on both: %d of %d rate runs did; over all of them the larger of the two CPUs' shares was %.1f%% (median), %.1f%% at most. The rates below are the medians of each system's clean runs (runs in brackets), and how many runs of each system were left out.\n\n",
		guestCPU, switchCPU, 100*stealLimit, cleanRuns, runs, 100*median(shares), 100*best(shares, higher))
	b.WriteString("| # | Scenario | Frame | Ring | xvswitch clean | DPDK clean | xvs/DPDK clean | runs with steal, xvswitch / DPDK |\n|---|---|---|---|---|---|---|---|\n")
	b.WriteString(strings.Join(rows, "\n") + "\n")
	return b.String()
}
