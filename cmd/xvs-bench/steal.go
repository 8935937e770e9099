package main

// Steal time: the time the hypervisor ran something else on the host
// thread of one of this machine's vCPUs while the vCPU had work. The
// machines this bench runs on are virtual machines on shared hosts, and
// there it comes and goes: 5% of both CPUs since boot on one, with
// stretches of 30-40% (docs/measuring.md). A run that lost part of its
// window to it measured the host, and both systems poll flat out, so it
// shows in the rate. Every run records the steal time of the guest's and
// the switch's CPUs over its measured window (/proc/stat), and the report
// compares the systems on the runs that had next to none (stealreport.go).

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Steal is the steal time of the guest's and the switch's CPUs over a
// run's measured window, in ms.
type Steal struct {
	GuestMs  float64 `json:"guest_cpu_ms"`
	SwitchMs float64 `json:"switch_cpu_ms"`
}

// stealMs reads /proc/stat's steal time of each CPU, in ms.
func stealMs() (map[int]float64, error) {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[int]float64{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// cpuN user nice system idle iowait irq softirq steal ...
		fs := strings.Fields(sc.Text())
		if len(fs) < 9 || !strings.HasPrefix(fs[0], "cpu") || fs[0] == "cpu" {
			continue
		}
		cpu, err := strconv.Atoi(fs[0][3:])
		if err != nil {
			continue
		}
		v, err := strconv.ParseUint(fs[8], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("/proc/stat: %s: steal %q: %v", fs[0], fs[8], err)
		}
		out[cpu] = float64(v) * 1000 / clockTick // in steps of 10 ms
	}
	return out, sc.Err()
}

// stealSince is the steal time of the bench's two CPUs since s0 (nil when
// either read failed).
func stealSince(s0 map[int]float64) *Steal {
	s1, err := stealMs()
	if s0 == nil || err != nil {
		return nil
	}
	return &Steal{GuestMs: s1[guestCPU] - s0[guestCPU], SwitchMs: s1[switchCPU] - s0[switchCPU]}
}
