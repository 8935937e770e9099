package main

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/xvswitch/xvswitch/ctl"
)

// This file renders bench.md's table of xvswitch's frames per burst: for
// each rate case, each port's and direction's average burst in the
// measured windows (its queues' packets over their bursts, from the path
// counters), the median over xvswitch's runs and their range. A queue
// whose bursts are near 32 frames (the switch's largest) had more waiting
// than the switch took: the switch set the rate. Well below 32, the other
// side did: the guest or the generator had fewer frames ready, or the
// guest fewer buffers, than the switch could have moved.

// burstSection is the table, or "" when no run has burst counts.
func (r *Report) burstSection() string {
	var rows []string
	for _, res := range r.Results {
		if res.Kind != kindRate {
			continue
		}
		per := map[string][]float64{} // "vu0 rx" -> each run's frames per burst
		for _, run := range res.Runs {
			if run.System != sysXvswitch || run.Error != "" || run.Profiled {
				continue
			}
			for name, p := range run.PathWindow {
				for _, d := range p.perBurst() {
					per[name+" "+d.dir] = append(per[name+" "+d.dir], d.frames)
				}
			}
		}
		if len(per) == 0 {
			continue
		}
		var cells []string
		for _, k := range slices.Sorted(maps.Keys(per)) {
			v := per[k]
			cells = append(cells, fmt.Sprintf("%s **%.1f** (%.1f-%.1f)", k, median(v), slices.Min(v), slices.Max(v)))
		}
		title := res.Title
		if res.Mode != "" {
			title += " (" + res.Mode + ")"
		}
		rows = append(rows, fmt.Sprintf("| %d | %s | %d | %s | %s |\n", res.Scenario, title, res.Size, res.Ring, strings.Join(cells, ", ")))
	}
	if len(rows) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("\n## Who set the rate: xvswitch's frames per burst\n\n")
	b.WriteString("Each port's average burst in the measured windows, per direction (rx: frames the switch took from it; tx: frames it gave it), over xvswitch's runs: median (lowest-highest). Near 32, the switch's largest burst, there was more waiting than the switch took each time: the switch's cost per frame set the rate. Well below 32 the other side set it: the guest (or generator) had fewer frames ready, or the guest fewer buffers posted, than the switch could have moved. DPDK's side has no such count; its window drops say when its switch outran the guest (frames it had and the guest had no buffer for).\n\n")
	b.WriteString("| # | Scenario | Frame | Ring | frames per burst |\n|---|---|---|---|---|\n")
	for _, row := range rows {
		b.WriteString(row)
	}
	return b.String()
}

// dirBurst is one direction's average burst: "rx" or "tx", frames.
type dirBurst struct {
	dir    string
	frames float64
}

// perBurst is the port's average burst over all its queues, rx then tx,
// each direction that had a burst.
func (p PortPath) perBurst() []dirBurst {
	var out []dirBurst
	if b := sum(p.RxBursts); b > 0 {
		out = append(out, dirBurst{"rx", ctl.PerBurst(sum(p.RxQueues), b)})
	}
	if b := sum(p.TxBursts); b > 0 {
		out = append(out, dirBurst{"tx", ctl.PerBurst(sum(p.TxQueues), b)})
	}
	return out
}

// perBurst is each port's average burst in the window, the ports that
// moved frames in name order: "vu0 rx 31.8 tx 12.0" (a run's log line).
func (p Paths) perBurst() string {
	var parts []string
	for _, name := range slices.Sorted(maps.Keys(p)) {
		s := name
		for _, d := range p[name].perBurst() {
			s += fmt.Sprintf(" %s %.1f", d.dir, d.frames)
		}
		if s != name {
			parts = append(parts, s)
		}
	}
	return strings.Join(parts, ", ")
}

func sum(v []uint64) uint64 {
	var n uint64
	for _, x := range v {
		n += x
	}
	return n
}

// streamed is, for each port that copied frames in the window and streamed
// some, the share it wrote into its guest's buffers with streaming stores,
// in name order: "vu0 97%" (a run's log line; with DPDK guests, the share
// says how much of the window the guest's CPU measured far from the
// worker's).
func (p Paths) streamed() string {
	var parts []string
	for _, name := range slices.Sorted(maps.Keys(p)) {
		if pc := p[name].PathCounters; pc.StreamedFrames > 0 && pc.CopiedFrames > 0 {
			parts = append(parts, fmt.Sprintf("%s %.0f%%", name, 100*float64(pc.StreamedFrames)/float64(pc.CopiedFrames)))
		}
	}
	return strings.Join(parts, ", ")
}
