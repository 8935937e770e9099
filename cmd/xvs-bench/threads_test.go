package main

import (
	"os"
	"runtime"
	"strings"
	"testing"
)

func TestParseCPUList(t *testing.T) {
	got, err := parseCPUList("0-2,5,7-7")
	if err != nil || cpuListString(got) != "0,1,2,5,7" {
		t.Errorf("parseCPUList: %v %v", got, err)
	}
	for _, bad := range []string{"a", "3-1", "1-x"} {
		if _, err := parseCPUList(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestStatLastCPU(t *testing.T) {
	// A name with spaces and a ')' must not shift the fields.
	fields := make([]string, 50)
	for i := range fields {
		fields[i] = "0"
	}
	fields[0] = "R"
	fields[39-3] = "1"
	line := "1234 (a (b) c) " + strings.Join(fields, " ") + "\n"
	if c, err := statLastCPU(line); err != nil || c != 1 {
		t.Errorf("statLastCPU = %d, %v; want 1", c, err)
	}
	if _, err := statLastCPU("1 (x) R 1 2"); err == nil {
		t.Errorf("a short stat line was accepted")
	}
}

// sample builds a thread sample: allowed CPUs, last CPU, CPU time in ms.
func sample(name string, allowed []int, last int, ms uint64) threadSample {
	return threadSample{name: name, allowed: allowed, lastCPU: last, cpuNs: ms * 1e6}
}

func TestPlacementCheck(t *testing.T) {
	const pid = 100
	rt, wk := []int{0}, []int{1}
	// As the bench runs xvswitch: the process on CPU 0, the worker (tid
	// 102) pinned to CPU 1 alone; a runtime thread (105) came during the
	// window and one (104) went.
	start := map[int]threadSample{
		100: sample("xvswitch", rt, 0, 10), 101: sample("xvswitch", rt, 0, 5),
		102: sample("xvswitch", wk, 1, 1000), 104: sample("xvswitch", rt, 0, 1),
	}
	end := map[int]threadSample{
		100: sample("xvswitch", rt, 0, 12), 101: sample("xvswitch", rt, 0, 5),
		102: sample("xvswitch", wk, 1, 3000), 105: sample("xvswitch", rt, 0, 4),
	}
	p := placementOf(pid, start, end, []int{1})
	if p.RuntimeOffWorkerCPU == nil || !*p.RuntimeOffWorkerCPU || len(p.Violations) != 0 {
		t.Fatalf("clean placement judged %v: %v", p.RuntimeOffWorkerCPU, p.Violations)
	}
	if tids := p.workerTIDs(); len(tids) != 1 || tids[0] != 102 {
		t.Errorf("workers %v, want [102]", tids)
	}
	if s := p.runtimeCPUSeconds(); s < 0.0059 || s > 0.0061 {
		t.Errorf("runtime CPU %v s, want 0.006 (2 ms + 4 ms of a new thread)", s)
	}
	byTID := map[int]Thread{}
	for _, th := range p.Threads {
		byTID[th.TID] = th
	}
	if !byTID[105].Came || !byTID[104].Went || byTID[102].CPUSeconds != 2 || byTID[102].Allowed != "1" {
		t.Errorf("threads %+v", p.Threads)
	}
	if w := workerThreads(pid, start, []int{1}); len(w) != 1 || w[0] != 102 {
		t.Errorf("workerThreads %v", w)
	}

	// Unpinned, as before -runtime-cpus: every runtime thread may run on
	// the worker's CPU, and one last ran there.
	both := []int{0, 1}
	start = map[int]threadSample{100: sample("xvswitch", both, 0, 10), 102: sample("xvswitch", wk, 1, 1000)}
	end = map[int]threadSample{100: sample("xvswitch", both, 1, 12), 102: sample("xvswitch", wk, 1, 3000)}
	p = placementOf(pid, start, end, []int{1})
	if *p.RuntimeOffWorkerCPU || len(p.Violations) != 3 {
		t.Errorf("unpinned runtime judged %v: %v (want 2 allowed-on, 1 last-ran-on)", *p.RuntimeOffWorkerCPU, p.Violations)
	}

	// The worker's goroutine locked the main thread: it is the worker.
	start = map[int]threadSample{100: sample("xvswitch", wk, 1, 10), 101: sample("xvswitch", rt, 0, 1)}
	p = placementOf(pid, start, start, []int{1})
	if !*p.RuntimeOffWorkerCPU || len(p.workerTIDs()) != 1 || p.workerTIDs()[0] != 100 {
		t.Errorf("worker on the main thread: %v %+v", p.Violations, p.Threads)
	}

	// The whole process on the worker's CPU (taskset -c 1): two threads
	// pinned there alone.
	start = map[int]threadSample{100: sample("xvswitch", wk, 1, 1), 101: sample("xvswitch", wk, 1, 1)}
	p = placementOf(pid, start, start, []int{1})
	if *p.RuntimeOffWorkerCPU || !strings.Contains(strings.Join(p.Violations, ";"), "a second thread pinned to worker CPU 1") {
		t.Errorf("all on the worker's CPU: %v", p.Violations)
	}
	// No thread pinned there at all.
	start = map[int]threadSample{100: sample("xvswitch", rt, 0, 1)}
	p = placementOf(pid, start, start, []int{1})
	if *p.RuntimeOffWorkerCPU || !strings.Contains(strings.Join(p.Violations, ";"), "no thread pinned to worker CPU 1 alone") {
		t.Errorf("no worker: %v", p.Violations)
	}

	// DPDK: recorded, not judged.
	p = placementOf(pid, start, start, nil)
	if p.RuntimeOffWorkerCPU != nil || len(p.Threads) != 1 {
		t.Errorf("DPDK placement %+v", p)
	}
}

func TestReadThreads(t *testing.T) {
	runtime.Gosched()
	th, err := readThreads(os.Getpid())
	if err != nil || len(th) == 0 {
		t.Fatalf("readThreads: %v %v", th, err)
	}
	main, ok := th[os.Getpid()]
	if !ok || len(main.allowed) == 0 || main.lastCPU < 0 || main.lastCPU >= runtime.NumCPU() || main.name == "" {
		t.Errorf("main thread %+v", main)
	}
}

// TestViolationSummary: the runtime's threads are counted, once each,
// whatever the window's end; other violations stay whole.
func TestViolationSummary(t *testing.T) {
	v := []string{
		"thread 7908 (xvswitch) allowed on worker CPU 1 (Cpus_allowed_list 0,1) at the window's start",
		"thread 7908 (xvswitch) last ran on worker CPU 1 at the window's start",
		"thread 7908 (xvswitch) allowed on worker CPU 1 (Cpus_allowed_list 0,1) at the window's end",
		"thread 7909 (xvswitch) allowed on worker CPU 1 (Cpus_allowed_list 0,1) at the window's end",
		"no thread pinned to worker CPU 1 alone",
	}
	want := "2 other threads allowed on the worker's CPU; 1 seen on it; no thread pinned to worker CPU 1 alone"
	if got := violationSummary(v); got != want {
		t.Errorf("violationSummary = %q, want %q", got, want)
	}
}
