// Package hostprobe reads what the host does to a virtual machine's CPUs,
// for the benchmarks that compare runs on one (cmd/xvs-bench, the
// cross-CPU benchmarks in the packages): how far apart two CPUs are (the
// one-way time of a cache line between them) and how much time the
// hypervisor took from each (steal time), and it pins threads for them.
// No production package imports it.
package hostprobe

import (
	"errors"
	"fmt"
	"runtime"
	"sort"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// Probe sizes: Batches batches of Trips round trips, the median batch
// counted (a batch that the scheduler interrupted is an outlier).
const (
	Batches = 5
	Trips   = 4000
	limit   = time.Second
)

var errTimeout = errors.New("cross-CPU probe: a CPU did not answer within 1 s (busy)")

// PinThread pins the calling goroutine's thread, which the caller locked
// (runtime.LockOSThread), to cpu, and returns what puts back the CPUs it
// was allowed before: a caller that unlocks the thread must call it
// first, or the thread goes back to Go's pool pinned.
func PinThread(cpu int) (restore func(), err error) {
	var was, set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &was); err != nil {
		return nil, fmt.Errorf("pin to CPU %d: %w", cpu, err)
	}
	set.Set(cpu)
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		return nil, fmt.Errorf("pin to CPU %d: %w", cpu, err)
	}
	return func() { _ = unix.SchedSetaffinity(0, &was) }, nil
}

// startPinned locks the calling goroutine to its thread, pins the thread
// to cpu, says so on ready (or why not), and waits for the go: false when
// pinning failed here or on the other side.
func startPinned(cpu int, ready chan<- error, start <-chan bool) bool {
	runtime.LockOSThread()
	if _, err := PinThread(cpu); err != nil {
		ready <- err
		return false
	}
	ready <- nil
	return <-start
}

// CrossCPULatency bounces one cache line between a thread on CPU a and
// one on CPU b and returns the one-way time in ns: the median over
// Batches batches of Trips round trips each.
func CrossCPULatency(a, b int) (float64, error) {
	var line struct {
		_ [64]byte
		v atomic.Uint64
		_ [64]byte
	}
	total := uint64(Batches * Trips)
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
		deadline := time.Now().Add(limit)
		for i := uint64(1); i <= total; i++ {
			if !spinUntil(&line.v, 2*i-1, deadline) {
				res <- errTimeout
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
		deadline := time.Now().Add(limit)
		ns := make([]float64, 0, Batches)
		i := uint64(1)
		for range Batches {
			t0 := time.Now()
			for range Trips {
				line.v.Store(2*i - 1)
				if !spinUntil(&line.v, 2*i, deadline) {
					batches <- nil
					return
				}
				i++
			}
			ns = append(ns, float64(time.Since(t0).Nanoseconds())/(2*Trips))
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
		return 0, errTimeout
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
