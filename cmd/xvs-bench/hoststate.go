package main

// The host's state: how far apart the bench's two CPUs are at the time of
// a run. On a virtual machine the host decides where the vCPUs run, and on
// the machines this bench runs on a cache line moving between CPU 0 and
// CPU 1 has taken ~25-45 ns one way at some times and ~180-265 ns at
// others, changing over seconds (docs/measuring.md). Every scenario's
// rings and buffers cross between those two CPUs, so the same code's rate
// moves by 2-3x with it, for both systems. Each run records that latency
// just before its processes start and just after they stop (the CPUs are
// idle then), so that runs can be compared in the same host state. The
// probe itself: test/hostprobe.

import (
	"runtime"
	"strings"

	"github.com/xvswitch/xvswitch/test/hostprobe"
)

// CrossCPU is the one-way latency of a cache line between the guest's and
// the switch's CPUs, in ns, before and after a run (0: not measured).
type CrossCPU struct {
	BeforeNs float64 `json:"before_ns"`
	AfterNs  float64 `json:"after_ns"`
}

// crossCPU measures the guest's and the switch's CPUs' distance for run r
// (0 when it failed, with a note on r).
func (b *bench) crossCPU(r *Run) float64 {
	if runtime.NumCPU() <= max(guestCPU, switchCPU) {
		return 0
	}
	ns, err := hostprobe.CrossCPULatency(guestCPU, switchCPU)
	if err != nil {
		r.Notes = strings.TrimSpace(r.Notes + " " + err.Error())
		return 0
	}
	return ns
}
