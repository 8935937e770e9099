package main

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestSpinners: each spinner is a process pinned to its CPU whose every
// thread is SCHED_IDLE (policy 5), so that nothing of it can preempt a
// switch's worker, and stop ends them.
func TestSpinners(t *testing.T) {
	if runtime.NumCPU() < 2 {
		t.Skip("needs 2 CPUs")
	}
	stop, err := startSpinners([]int{0, 1})
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	defer func() {
		if !stopped {
			stop()
		}
	}()
	found := map[string]bool{}
	deadline := time.Now().Add(5 * time.Second)
	for len(found) < 2 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		for pid, cpu := range spinnerPIDs() {
			tasks, _ := filepath.Glob("/proc/" + pid + "/task/[0-9]*")
			ok := len(tasks) > 0
			for _, task := range tasks {
				sched, _ := os.ReadFile(task + "/sched")
				status, _ := os.ReadFile(task + "/status")
				if !policyIdle(string(sched)) || allowedCPUs(string(status)) != cpu {
					ok = false // not yet through taskset and chrt, or wrong
				}
			}
			if ok {
				found[cpu] = true
			}
		}
	}
	if !found["0"] || !found["1"] {
		t.Fatalf("spinners with every thread SCHED_IDLE and pinned found on CPUs %v, want 0 and 1", found)
	}
	stop()
	stopped = true
	if left := spinnerPIDs(); len(left) != 0 {
		t.Errorf("spinners %v still run after stop", left)
	}
}

// spinnerPIDs maps the processes whose environment marks them spinners
// to the CPU it names.
func spinnerPIDs() map[string]string {
	out := map[string]string{}
	envs, _ := filepath.Glob("/proc/[0-9]*/environ")
	for _, e := range envs {
		env, _ := os.ReadFile(e)
		for _, kv := range strings.Split(string(env), "\x00") {
			if cpu, ok := strings.CutPrefix(kv, spinEnv+"="); ok {
				out[strings.Split(e, "/")[2]] = cpu
			}
		}
	}
	return out
}

func allowedCPUs(status string) string {
	for _, line := range strings.Split(status, "\n") {
		if cpus, ok := strings.CutPrefix(line, "Cpus_allowed_list:"); ok {
			return strings.TrimSpace(cpus)
		}
	}
	return ""
}

func policyIdle(sched string) bool {
	for _, line := range strings.Split(sched, "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[0] == "policy" {
			return f[2] == "5"
		}
	}
	return false
}
