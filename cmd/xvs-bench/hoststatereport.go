package main

import (
	"fmt"
	"math"
	"strings"

	"github.com/xvswitch/xvswitch/test/hostprobe"
)

// statesApart: the probes show two host states when the highest is at
// least this many times the lowest. The states this machine has shown
// are ~25 and ~180 ns (7x, hoststate.go); one state's own spread stays
// well under 2x.
const statesApart = 2

// nearLimit is the probe under which a run counts as near: the geometric
// mean of the lowest and the highest, the point equally far (as a ratio)
// from both states; with one state seen, every run is near.
func nearLimit(lo, hi float64) float64 {
	if hi < statesApart*lo {
		return hi + 1
	}
	return math.Sqrt(lo * hi)
}

// crossRange is the lowest, median and highest probe over the runs, and
// how many probes there were.
func (r *Report) crossRange() (lo, med, hi float64, n int) {
	var all []float64
	for _, res := range r.Results {
		for _, run := range res.Runs {
			for _, ns := range []float64{run.CrossCPU.BeforeNs, run.CrossCPU.AfterNs} {
				if ns > 0 {
					all = append(all, ns)
				}
			}
		}
	}
	if len(all) == 0 {
		return 0, 0, 0, 0
	}
	lo, hi = all[0], all[0]
	for _, v := range all {
		lo, hi = min(lo, v), max(hi, v)
	}
	return lo, median(all), hi, len(all)
}

// near says whether run had both probes and both were near.
func (run Run) near(limit float64) bool {
	c := run.CrossCPU
	return c.BeforeNs > 0 && c.AfterNs > 0 && c.BeforeNs < limit && c.AfterNs < limit
}

// far says whether run had both probes and both were at or above limit.
func (run Run) far(limit float64) bool {
	c := run.CrossCPU
	return c.BeforeNs >= limit && c.AfterNs >= limit
}

// stateAgreement says how well the probes predict a run's speed: of the
// rate runs whose two probes agreed (both near or both far), how many ran
// on the side of their case's geometric mid-rate (of its lowest and
// highest run, both systems) that the state predicts: above when near,
// below when far. About half would be chance; all would make the state
// the whole story.
func (r *Report) stateAgreement(limit float64) (agree, of int) {
	for _, res := range r.Results {
		if res.Kind != kindRate {
			continue
		}
		lo, hi := math.Inf(1), 0.0
		for _, run := range res.Runs {
			if run.Error == "" && !run.Profiled && run.Mpps > 0 {
				lo, hi = min(lo, run.Mpps), max(hi, run.Mpps)
			}
		}
		mid := math.Sqrt(lo * hi)
		for _, run := range res.Runs {
			if run.Error != "" || run.Profiled || run.Mpps <= 0 {
				continue
			}
			near, far := run.near(limit), run.far(limit)
			if !near && !far {
				continue
			}
			of++
			if near == (run.Mpps > mid) {
				agree++
			}
		}
	}
	return agree, of
}

// hostStateSection compares the systems' rates within one host state:
// the runs that began and ended near, and the others.
func (r *Report) hostStateSection() string {
	lo, med, hi, n := r.crossRange()
	if n == 0 {
		return ""
	}
	limit := nearLimit(lo, hi)
	var rows []string
	nearRuns, runs := 0, 0
	for _, res := range r.Results {
		if res.Kind != kindRate {
			continue
		}
		var xn, dn, xf, df []float64
		for _, run := range res.Runs {
			if run.Error != "" || run.Profiled {
				continue
			}
			runs++
			isNear := run.near(limit)
			if isNear {
				nearRuns++
			}
			switch {
			case run.System == sysXvswitch && isNear:
				xn = append(xn, run.Mpps)
			case run.System == sysXvswitch:
				xf = append(xf, run.Mpps)
			case run.System == sysDPDK && isNear:
				dn = append(dn, run.Mpps)
			case run.System == sysDPDK:
				df = append(df, run.Mpps)
			}
		}
		title := res.Title
		if res.Mode != "" {
			title += " (" + res.Mode + ")"
		}
		rows = append(rows, fmt.Sprintf("| %d | %s | %d | %s | %s | %s | %s | %s | %s | %s |", res.Scenario, title, res.Size, res.Ring,
			stateCell(xn), stateCell(dn), stateRatio(xn, dn), stateCell(xf), stateCell(df), stateRatio(xf, df)))
	}
	agree, of := r.stateAgreement(limit)
	var b strings.Builder
	fmt.Fprintf(&b, "\n## Host state: how far apart the two CPUs were\n\nBefore and after every run the bench bounced a cache line between CPU %d and CPU %d (test/hostprobe: one way, the median of %d batches of %d round trips): lowest %.0f ns, median %.0f, highest %.0f over %d probes. A run counts as near when both of its probes were under %.0f ns (the geometric mean of the lowest and the highest, or above the highest when they are less than %dx apart): %d of %d rate runs were. The rates below are the medians of each system's runs in one state (runs in brackets): they would compare like with like if a run's rate followed the state and the state held through its window. How far that is so: of the %d rate runs whose two probes agreed (both near or both far), %d ran on the side of their case's geometric mid-rate that the state predicts (above when near, below when far; chance is about half).\n\n", guestCPU, switchCPU, hostprobe.Batches, hostprobe.Trips, lo, med, hi, n, limit, statesApart, nearRuns, runs, of, agree)
	if len(rows) == 0 {
		return b.String()
	}
	b.WriteString("| # | Scenario | Frame | Ring | xvswitch near | DPDK near | xvs/DPDK near | xvswitch other | DPDK other | xvs/DPDK other |\n|---|---|---|---|---|---|---|---|---|---|\n")
	b.WriteString(strings.Join(rows, "\n") + "\n")
	return b.String()
}

func stateCell(v []float64) string {
	if len(v) == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f Mpps (%d)", median(v), len(v))
}

func stateRatio(x, d []float64) string {
	if len(x) == 0 || len(d) == 0 {
		return "-"
	}
	return ratioCell(kindRate, ratio(median(x), median(d)))
}
