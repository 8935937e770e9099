package main

import (
	"fmt"
	"strings"
)

// This file renders the zero-copy table of bench.md: for each case that
// ran xvswitch's zero-copy system (scenarios 4 and 5), one row per
// system with its rate, offered load, window drops, the switching
// process's CPU time per frame, and, for xvswitch, the path its frames
// took in the windows (the path counters: frames sent with no copy by the
// switch, frames and bytes it copied).

var systemLabels = map[string]string{
	sysXvswitch:         "xvswitch, copy path",
	sysXvswitchZerocopy: "xvswitch, zero-copy path (own=)",
	sysDPDK:             "DPDK af_xdp + vhost",
}

// zerocopySection is the table, or "" if no case ran the zero-copy system.
func (r *Report) zerocopySection() string {
	var b strings.Builder
	for _, res := range r.Results {
		if !res.has(sysXvswitchZerocopy) {
			continue
		}
		if b.Len() == 0 {
			b.WriteString("\n## Zero-copy NIC <-> VM\n\n")
			b.WriteString("xvswitch's copy path, its zero-copy path (the guest's port owns queue 0 of a 2-queue veth: `own=`, `spoof=allow`) and DPDK, alternated in each round. CPU per frame is the switching process's CPU share over the window divided by the frame rate (median of the runs, every run in brackets; best = lowest); with a switch that polls flat out it is its share of the CPU over the rate, empty polls included (see -idle-after). Path: xvswitch's path counters summed over its runs' windows, all ports: frames sent with no copy by the switch, frames it copied, and the bytes it copied per frame.\n\n")
			b.WriteString("| # | Scenario | Frame | Ring | System | rate median (runs) | offered | window drops | CPU per frame median (runs) | best | vs copy path | path in the windows |\n")
			b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|\n")
		}
		copyNs := res.summary(sysXvswitch).MedianNsPerFrame
		for _, sys := range res.systems() {
			s := res.summary(sys)
			if s.Runs == 0 {
				fmt.Fprintf(&b, "| %d | %s | %d | %s | %s | failed | | | | | | |\n", res.Scenario, res.Title, res.Size, res.Ring, systemLabels[sys])
				continue
			}
			var mpps, ns []float64
			for _, run := range res.Runs {
				if run.System == sys && run.Error == "" && !run.Profiled {
					mpps = append(mpps, run.Mpps)
					ns = append(ns, run.NsPerFrame)
				}
			}
			vs := "-"
			if sys != sysXvswitch && copyNs > 0 {
				vs = fmt.Sprintf("%.2fx", s.MedianNsPerFrame/copyNs)
			}
			drops := fmt.Sprint(s.MedianWindowDrops)
			if s.MaxWindowDrops != s.MedianWindowDrops {
				drops += fmt.Sprintf(" (%d)", s.MaxWindowDrops)
			}
			fmt.Fprintf(&b, "| %d | %s | %d | %s | %s | **%.3f Mpps** (%s) | %.3f Mpps | %s | **%.0f ns** (%s) | %.0f ns | %s | %s |\n",
				res.Scenario, res.Title, res.Size, res.Ring, systemLabels[sys],
				s.MedianMpps, joinFloats(mpps, "%.3f"), s.MedianOfferedMpps, drops,
				s.MedianNsPerFrame, joinFloats(ns, "%.0f"), s.BestNsPerFrame, vs, pathCell(res.Runs, sys))
		}
	}
	return b.String()
}

// pathCell sums sys's path counters over its runs' windows.
func pathCell(runs []Run, sys string) string {
	if sys == sysDPDK {
		return "(no such counters)"
	}
	var zc, copied, bytes uint64
	seen := false
	for _, run := range runs {
		if run.System != sys || run.Error != "" || run.Profiled || run.PathWindow == nil {
			continue
		}
		seen = true
		for _, p := range run.PathWindow {
			zc += p.ZerocopyFrames
			copied += p.CopiedFrames
			bytes += p.CopiedBytes
		}
	}
	if !seen {
		return "-"
	}
	if zc+copied == 0 {
		return "no frames counted"
	}
	return fmt.Sprintf("%.1f%% zero-copy: %d zero-copy, %d copied, %.1f B copied per frame",
		100*float64(zc)/float64(zc+copied), zc, copied, float64(bytes)/float64(zc+copied))
}
