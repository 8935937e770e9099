package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// This file records where every thread of a switching process ran during
// the measured window, and checks xvswitch's: its worker thread alone on
// the worker's CPU, the Go runtime's threads (vhost-user messages, the
// control socket, the Notifier, the garbage collector) elsewhere. The
// kernel enforces a thread's Cpus_allowed_list, so a thread that was not
// allowed on the worker's CPU at the window's start and end never ran
// there in between (only a sched_setaffinity call changes it, and only the
// worker makes one); the last CPU each thread ran on (field 39 of its
// stat) is read at both ends too, as a witness.

// threadSample is one thread as /proc showed it at one moment.
type threadSample struct {
	name    string
	allowed []int // Cpus_allowed_list
	lastCPU int   // field 39 of stat: the CPU it last ran on
	cpuNs   uint64
}

// Thread is one thread of the switching process over the window.
type Thread struct {
	TID        int     `json:"tid"`
	Name       string  `json:"name"`
	Allowed    string  `json:"cpus_allowed"`
	LastCPU    int     `json:"last_cpu"` // at the window's end (or when last seen)
	CPUSeconds float64 `json:"cpu_seconds_in_window"`
	Worker     bool    `json:"worker,omitempty"`
	// Came or Went: the thread started or exited during the window.
	Came bool `json:"started_in_window,omitempty"`
	Went bool `json:"exited_in_window,omitempty"`
}

// Placement is where a switching process's threads were during the window.
type Placement struct {
	// WorkerCPUs are the CPUs xvswitch pinned its workers to (--cpus).
	WorkerCPUs []int    `json:"worker_cpus,omitempty"`
	Threads    []Thread `json:"threads"`
	// RuntimeOffWorkerCPU (xvswitch): one worker thread per worker CPU,
	// allowed there alone, and no other thread allowed on or last seen
	// on a worker CPU at the window's start or end. Violations say what
	// broke it.
	RuntimeOffWorkerCPU *bool    `json:"runtime_off_worker_cpu,omitempty"`
	Violations          []string `json:"violations,omitempty"`
}

// readThreads samples every thread of pid.
func readThreads(pid int) (map[int]threadSample, error) {
	dir := filepath.Join("/proc", strconv.Itoa(pid), "task")
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	out := map[int]threadSample{}
	for _, tk := range tasks {
		tid, err := strconv.Atoi(tk.Name())
		if err != nil {
			continue
		}
		s, err := readThread(filepath.Join(dir, tk.Name()))
		if err != nil {
			if os.IsNotExist(err) {
				continue // it just exited
			}
			return nil, fmt.Errorf("thread %d: %w", tid, err)
		}
		out[tid] = s
	}
	return out, nil
}

func readThread(dir string) (threadSample, error) {
	var s threadSample
	comm, err := os.ReadFile(filepath.Join(dir, "comm"))
	if err != nil {
		return s, err
	}
	s.name = strings.TrimSpace(string(comm))
	status, err := os.ReadFile(filepath.Join(dir, "status"))
	if err != nil {
		return s, err
	}
	for _, l := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(l, "Cpus_allowed_list:"); ok {
			if s.allowed, err = parseCPUList(strings.TrimSpace(v)); err != nil {
				return s, err
			}
		}
	}
	stat, err := os.ReadFile(filepath.Join(dir, "stat"))
	if err != nil {
		return s, err
	}
	if s.lastCPU, err = statLastCPU(string(stat)); err != nil {
		return s, err
	}
	if b, err := os.ReadFile(filepath.Join(dir, "schedstat")); err == nil {
		if f := strings.Fields(string(b)); len(f) > 0 {
			s.cpuNs, _ = strconv.ParseUint(f[0], 10, 64)
		}
	}
	return s, nil
}

// statLastCPU returns field 39 of a /proc/.../stat line ("processor").
// The command name (field 2) is in parentheses and may hold spaces, so
// fields are counted after the last ')': field 3 is the first there.
func statLastCPU(stat string) (int, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("stat: no ')'")
	}
	f := strings.Fields(stat[i+1:])
	const field = 39 - 3
	if len(f) <= field {
		return 0, fmt.Errorf("stat: %d fields after the name", len(f))
	}
	return strconv.Atoi(f[field])
}

// parseCPUList parses a CPU list as the kernel prints it: "0-2,5".
func parseCPUList(s string) ([]int, error) {
	var out []int
	for _, part := range strings.Split(s, ",") {
		if part == "" {
			continue
		}
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			return nil, fmt.Errorf("CPU list %q", s)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a {
				return nil, fmt.Errorf("CPU list %q", s)
			}
		}
		for c := a; c <= b; c++ {
			out = append(out, c)
		}
	}
	return out, nil
}

func cpuListString(cpus []int) string {
	parts := make([]string, len(cpus))
	for i, c := range cpus {
		parts[i] = strconv.Itoa(c)
	}
	return strings.Join(parts, ",")
}

// placementOf makes the window's record from the samples at its start
// and end. With workerCPUs (xvswitch) it also checks that the worker
// threads had their CPUs to themselves: a worker thread is one allowed on
// exactly one worker CPU, one per worker CPU.
func placementOf(pid int, start, end map[int]threadSample, workerCPUs []int) Placement {
	p := Placement{WorkerCPUs: workerCPUs}
	onWorkerCPU := func(c int) bool {
		for _, w := range workerCPUs {
			if c == w {
				return true
			}
		}
		return false
	}
	isWorker := func(tid int, s threadSample) bool { return isWorkerThread(pid, tid, s, workerCPUs) }
	tids := map[int]bool{}
	for tid := range start {
		tids[tid] = true
	}
	for tid := range end {
		tids[tid] = true
	}
	order := make([]int, 0, len(tids))
	for tid := range tids {
		order = append(order, tid)
	}
	sort.Ints(order)
	workers := map[int]bool{} // CPUs with a worker thread
	for _, tid := range order {
		s0, in0 := start[tid]
		s1, in1 := end[tid]
		last := s1
		if !in1 {
			last = s0
		}
		th := Thread{TID: tid, Name: last.name, Allowed: cpuListString(last.allowed), LastCPU: last.lastCPU, Came: !in0, Went: !in1}
		if in0 && in1 && s1.cpuNs >= s0.cpuNs {
			th.CPUSeconds = float64(s1.cpuNs-s0.cpuNs) / 1e9
		} else if !in0 {
			th.CPUSeconds = float64(s1.cpuNs) / 1e9
		}
		if len(workerCPUs) > 0 {
			th.Worker = (!in0 || isWorker(tid, s0)) && (!in1 || isWorker(tid, s1))
			if th.Worker {
				if workers[last.allowed[0]] {
					p.Violations = append(p.Violations, fmt.Sprintf("a second thread pinned to worker CPU %d: %d (%s)", last.allowed[0], tid, last.name))
				}
				workers[last.allowed[0]] = true
			} else {
				for _, s := range []struct {
					when string
					ok   bool
					s    threadSample
				}{{"start", in0, s0}, {"end", in1, s1}} {
					if !s.ok {
						continue
					}
					for _, c := range s.s.allowed {
						if onWorkerCPU(c) {
							p.Violations = append(p.Violations, fmt.Sprintf("thread %d (%s) allowed on worker CPU %d (Cpus_allowed_list %s) at the window's %s", tid, s.s.name, c, cpuListString(s.s.allowed), s.when))
							break
						}
					}
					if onWorkerCPU(s.s.lastCPU) {
						p.Violations = append(p.Violations, fmt.Sprintf("thread %d (%s) last ran on worker CPU %d at the window's %s", tid, s.s.name, s.s.lastCPU, s.when))
					}
				}
			}
		}
		p.Threads = append(p.Threads, th)
	}
	if len(workerCPUs) > 0 {
		for _, c := range workerCPUs {
			if !workers[c] {
				p.Violations = append(p.Violations, fmt.Sprintf("no thread pinned to worker CPU %d alone", c))
			}
		}
		ok := len(p.Violations) == 0
		p.RuntimeOffWorkerCPU = &ok
	}
	return p
}

// isWorkerThread: tid of pid is allowed on exactly one of workerCPUs.
// It can be the main thread: a worker's goroutine locks whichever thread
// it runs on. (A whole process pinned to a worker's CPU has several such
// threads: placementOf reports the second.)
func isWorkerThread(pid, tid int, s threadSample, workerCPUs []int) bool {
	if len(s.allowed) != 1 {
		return false
	}
	for _, w := range workerCPUs {
		if s.allowed[0] == w {
			return true
		}
	}
	return false
}

// workerThreads are the worker threads of pid in a sample, by tid.
func workerThreads(pid int, sample map[int]threadSample, workerCPUs []int) []int {
	var out []int
	for tid, s := range sample {
		if isWorkerThread(pid, tid, s, workerCPUs) {
			out = append(out, tid)
		}
	}
	sort.Ints(out)
	return out
}

// runtimeCPUSeconds is the CPU time of the process's threads but the
// workers over the window.
func (p Placement) runtimeCPUSeconds() float64 {
	var s float64
	for _, t := range p.Threads {
		if !t.Worker {
			s += t.CPUSeconds
		}
	}
	return s
}

// workerTIDs are the worker threads' ids.
func (p Placement) workerTIDs() []int {
	var out []int
	for _, t := range p.Threads {
		if t.Worker {
			out = append(out, t.TID)
		}
	}
	return out
}

// violationSummary shortens a run's placement violations for logs and
// bench.md: with the runtime unpinned (the default) every runtime thread
// is allowed on the worker's CPU at both ends of the window, which as a
// list is dozens of lines saying one thing. The threads allowed there and
// those seen there are counted; anything else is kept word for word.
// bench.json keeps the whole list.
func violationSummary(v []string) string {
	allowed, ran := map[string]bool{}, map[string]bool{}
	var other []string
	for _, s := range v {
		var tid int
		var rest string
		if _, err := fmt.Sscanf(s, "thread %d %s", &tid, &rest); err != nil {
			other = append(other, s)
			continue
		}
		switch {
		case strings.Contains(s, " allowed on worker CPU "):
			allowed[strconv.Itoa(tid)] = true
		case strings.Contains(s, " last ran on worker CPU "):
			ran[strconv.Itoa(tid)] = true
		default:
			other = append(other, s)
		}
	}
	var parts []string
	if len(allowed) > 0 {
		parts = append(parts, fmt.Sprintf("%d other threads allowed on the worker's CPU", len(allowed)))
	}
	if len(ran) > 0 {
		parts = append(parts, fmt.Sprintf("%d seen on it", len(ran)))
	}
	return strings.Join(append(parts, other...), "; ")
}
