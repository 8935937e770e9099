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
// The reading itself: test/hostprobe.

import "github.com/xvswitch/xvswitch/test/hostprobe"

// Steal is the steal time of the guest's and the switch's CPUs over a
// run's measured window, in ms.
type Steal struct {
	GuestMs  float64 `json:"guest_cpu_ms"`
	SwitchMs float64 `json:"switch_cpu_ms"`
}

// stealSince is the steal time of the bench's two CPUs since s0 (nil when
// either read failed).
func stealSince(s0 map[int]float64) *Steal {
	s1, err := hostprobe.StealMs()
	if s0 == nil || err != nil {
		return nil
	}
	return &Steal{GuestMs: s1[guestCPU] - s0[guestCPU], SwitchMs: s1[switchCPU] - s0[switchCPU]}
}
