package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// This file starts the bench's own child processes (xvswitch, the
// namespace's generator) and reads any process's CPU time and peak memory
// from /proc.

// proc is a child process whose output goes to a log file.
type proc struct {
	cmd    *exec.Cmd
	log    string
	exited chan struct{}
	err    error
}

// startProc starts argv with its own process group, killed if the bench
// dies (Pdeathsig fires when the forking thread exits, so the fork and the
// wait run on one locked thread), output to logPath, and registers its
// stop with t. env, if not nil, is added to the bench's environment.
func startProc(t *runT, logPath string, env []string, argv ...string) *proc {
	f, err := os.Create(logPath)
	if err != nil {
		t.Fatalf("%v", err)
	}
	fmt.Fprintf(f, "# %s\n", strings.Join(append(append([]string(nil), env...), argv...), " "))
	p := &proc{cmd: exec.Command(argv[0], argv[1:]...), log: logPath, exited: make(chan struct{})}
	if env != nil {
		p.cmd.Env = append(os.Environ(), env...)
	}
	p.cmd.Stdout, p.cmd.Stderr = f, f
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := p.cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		p.err = p.cmd.Wait()
		f.Close()
		close(p.exited)
	}()
	if err := <-started; err != nil {
		f.Close()
		t.Fatalf("start %s: %v", argv[0], err)
	}
	t.Cleanup(p.stop)
	return p
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

func (p *proc) done() bool {
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM to the process group, then SIGKILL after 10 s, and
// waits for the process's Wait at most 30 s more: a process can be gone
// while its Wait does not return (seen with testpmd, docs/testing-peers.md),
// and a bench must not hang on it.
func (p *proc) stop() {
	if p.done() {
		return
	}
	_ = syscall.Kill(-p.pid(), syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-p.pid(), syscall.SIGKILL)
		select {
		case <-p.exited:
		case <-time.After(30 * time.Second):
		}
	}
}

// tail returns the last lines of the process's log, for error messages.
func tail(path string, n int) string {
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// clockTick is USER_HZ, the unit of utime and stime in /proc/<pid>/stat:
// 100 on every Linux architecture Go runs on.
const clockTick = 100

// cpuSeconds returns the CPU time of pid's live threads, from each
// thread's schedstat (nanoseconds on the CPU), summed: /proc/<pid>/stat
// counts in 10 ms ticks, too coarse for an idle switch. A thread that
// exits within the window takes its time with it; neither switch's
// threads come and go while it runs. Falls back to stat without
// schedstats.
func cpuSeconds(pid int) (float64, error) {
	tasks, err := os.ReadDir(filepath.Join("/proc", strconv.Itoa(pid), "task"))
	if err != nil {
		return 0, err
	}
	var ns uint64
	for _, tk := range tasks {
		b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "task", tk.Name(), "schedstat"))
		if err != nil {
			if os.IsNotExist(err) {
				continue // the thread just exited
			}
			return statCPUSeconds(pid)
		}
		f := strings.Fields(string(b))
		if len(f) == 0 {
			return statCPUSeconds(pid)
		}
		n, err := strconv.ParseUint(f[0], 10, 64)
		if err != nil {
			return statCPUSeconds(pid)
		}
		ns += n
	}
	return float64(ns) / 1e9, nil
}

// statCPUSeconds returns the user + system CPU time of every thread of
// pid, from /proc/<pid>/stat (10 ms resolution).
func statCPUSeconds(pid int) (float64, error) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) is in parentheses and may hold spaces:
	// count fields after the last ')'. utime and stime are fields 14, 15.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no ')'", pid)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	u, err1 := strconv.ParseUint(f[11], 10, 64)
	st, err2 := strconv.ParseUint(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: utime %q stime %q", pid, f[11], f[12])
	}
	return float64(u+st) / clockTick, nil
}

// peakRSSMiB returns VmHWM, the process's peak resident set, in MiB.
func peakRSSMiB(pid int) (float64, error) {
	f, err := os.Open(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("VmHWM %q: %v", v, err)
			}
			return float64(kb) / 1024, nil
		}
	}
	return 0, fmt.Errorf("/proc/%d/status: no VmHWM", pid)
}

// loadAvg returns /proc/loadavg's first three numbers.
func loadAvg() [3]float64 {
	var l [3]float64
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	for i := 0; i < 3 && i < len(f); i++ {
		l[i], _ = strconv.ParseFloat(f[i], 64)
	}
	return l
}

// threadPlacement says which CPUs each thread of pid may run on, grouped
// by thread name: "dpdk-worker1@1, eal-intr-thread@0, dpdk-testpmd@1 x2".
func threadPlacement(pid int) string {
	tasks, err := os.ReadDir(filepath.Join("/proc", strconv.Itoa(pid), "task"))
	if err != nil {
		return "unknown: " + err.Error()
	}
	count := map[string]int{}
	var order []string
	for _, tk := range tasks {
		dir := filepath.Join("/proc", strconv.Itoa(pid), "task", tk.Name())
		comm, _ := os.ReadFile(filepath.Join(dir, "comm"))
		status, _ := os.ReadFile(filepath.Join(dir, "status"))
		cpus := "?"
		for _, l := range strings.Split(string(status), "\n") {
			if v, ok := strings.CutPrefix(l, "Cpus_allowed_list:"); ok {
				cpus = strings.TrimSpace(v)
			}
		}
		key := strings.TrimSpace(string(comm)) + "@" + cpus
		if count[key] == 0 {
			order = append(order, key)
		}
		count[key]++
	}
	parts := make([]string, len(order))
	for i, k := range order {
		parts[i] = k
		if count[k] > 1 {
			parts[i] += fmt.Sprintf(" x%d", count[k])
		}
	}
	return strings.Join(parts, ", ")
}

// threadStates lists each thread of pid with its scheduler state and, if
// it sleeps, the kernel function it waits in: "R", "S futex_do_wait".
// Recorded when a switch that should be polling used almost no CPU, to
// tell a starved process (R) from a stuck one (S).
func threadStates(pid int) string {
	tasks, err := os.ReadDir(filepath.Join("/proc", strconv.Itoa(pid), "task"))
	if err != nil {
		return err.Error()
	}
	var out []string
	for _, tk := range tasks {
		dir := filepath.Join("/proc", strconv.Itoa(pid), "task", tk.Name())
		comm, _ := os.ReadFile(filepath.Join(dir, "comm"))
		stat, _ := os.ReadFile(filepath.Join(dir, "stat"))
		wchan, _ := os.ReadFile(filepath.Join(dir, "wchan"))
		state := "?"
		if i := strings.LastIndexByte(string(stat), ')'); i >= 0 {
			if f := strings.Fields(string(stat)[i+1:]); len(f) > 0 {
				state = f[0]
			}
		}
		s := fmt.Sprintf("%s/%s:%s", strings.TrimSpace(string(comm)), tk.Name(), state)
		if w := strings.TrimSpace(string(wchan)); w != "" && w != "0" {
			s += " " + w
		}
		out = append(out, s)
	}
	return strings.Join(out, ", ")
}
