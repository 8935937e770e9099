package main

// The host's state: how far apart the bench's two CPUs are at the time of
// a run. On a virtual machine the host decides where the vCPUs run, and on
// the machines this bench runs on a cache line moving between CPU 0 and
// CPU 1 has taken ~25-45 ns one way at some times and ~180-265 ns at
// others, changing over seconds (docs/measuring.md). Every scenario's
// rings and buffers cross between those two CPUs, so the same code's rate
// moves by 2-3x with it, for both systems. Each run records that latency
// just before its processes start and just after they stop (the CPUs are
// idle then), so that runs can be compared in the same host state.

import (
	"errors"
	"fmt"
	"runtime"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// CrossCPU is the one-way latency of a cache line between the guest's and
// the switch's CPUs, in ns, before and after a run (0: not measured).
type CrossCPU struct {
	BeforeNs float64 `json:"before_ns"`
	AfterNs  float64 `json:"after_ns"`
}

// Probe sizes: crossBatches batches of crossTrips round trips, the median
// batch counted (a batch that the scheduler interrupted is an outlier).
const (
	crossBatches = 5
	crossTrips   = 4000
	crossLimit   = time.Second
)

var errCrossTimeout = errors.New("cross-CPU probe: a CPU did not answer within 1 s (busy)")

// startPinned locks the calling goroutine to its thread, pins the thread
// to cpu, says so on ready (or why not), and waits for the go: false when
// pinning failed here or on the other side.
func startPinned(cpu int, ready chan<- error, start <-chan bool) bool {
	runtime.LockOSThread()
	if err := pinThread(cpu); err != nil {
		ready <- err
		return false
	}
	ready <- nil
	return <-start
}

// crossCPULatency bounces one cache line between a thread on CPU a and
// one on CPU b and returns the one-way time in ns: the median over
// crossBatches batches of crossTrips round trips each.
func crossCPULatency(a, b int) (float64, error) {
	var line struct {
		_ [64]byte
		v atomic.Uint64
		_ [64]byte
	}
	total := uint64(crossBatches * crossTrips)
	ready := make(chan error, 2)
	start := make(chan bool, 2) // true: both sides are pinned, go
	res := make(chan error, 1)
	batches := make(chan []float64, 1)
	// Both sides lock their goroutine to a thread and never unlock it:
	// the thread, whose CPU mask was changed, exits with the goroutine
	// instead of going back to the runtime's pool.
	go func() {
		if !startPinned(b, ready, start) {
			res <- nil
			return
		}
		deadline := time.Now().Add(crossLimit)
		for i := uint64(1); i <= total; i++ {
			if !spinUntil(&line.v, 2*i-1, deadline) {
				res <- errCrossTimeout
				return
			}
			line.v.Store(2 * i)
		}
		res <- nil
	}()
	go func() {
		if !startPinned(a, ready, start) {
			batches <- nil
			return
		}
		deadline := time.Now().Add(crossLimit)
		ns := make([]float64, 0, crossBatches)
		i := uint64(1)
		for range crossBatches {
			t0 := time.Now()
			for range crossTrips {
				line.v.Store(2*i - 1)
				if !spinUntil(&line.v, 2*i, deadline) {
					batches <- nil
					return
				}
				i++
			}
			ns = append(ns, float64(time.Since(t0).Nanoseconds())/(2*crossTrips))
		}
		batches <- ns
	}()
	err := errors.Join(<-ready, <-ready)
	start <- err == nil
	start <- err == nil
	ns := <-batches
	if err != nil {
		<-res
		return 0, err
	}
	if err := <-res; err != nil {
		return 0, err
	}
	if ns == nil {
		return 0, errCrossTimeout
	}
	sort.Float64s(ns)
	return ns[len(ns)/2], nil
}

// spinUntil spins until v holds want, or says false once deadline passed
// (the clock read every 1024 spins).
func spinUntil(v *atomic.Uint64, want uint64, deadline time.Time) bool {
	for spins := 0; v.Load() != want; spins++ {
		if spins&1023 == 1023 && time.Now().After(deadline) {
			return false
		}
	}
	return true
}

// pinThread pins the calling (locked) thread to cpu.
func pinThread(cpu int) error {
	var set unix.CPUSet
	set.Set(cpu)
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		return fmt.Errorf("pin to CPU %d: %w", cpu, err)
	}
	return nil
}

// crossCPU measures the guest's and the switch's CPUs' distance for run r
// (0 when it failed, with a note on r).
func (b *bench) crossCPU(r *Run) float64 {
	if runtime.NumCPU() <= max(guestCPU, switchCPU) {
		return 0
	}
	ns, err := crossCPULatency(guestCPU, switchCPU)
	if err != nil {
		r.Notes = strings.TrimSpace(r.Notes + " " + err.Error())
		return 0
	}
	return ns
}
