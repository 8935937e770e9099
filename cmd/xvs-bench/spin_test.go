package main

import (
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestMain lets the spinners this package's tests start (the test binary,
// re-executed) spin instead of running the tests.
func TestMain(m *testing.M) {
	spinIfAsked()
	os.Exit(m.Run())
}

// TestSpinners: each spinner is a process with one thread pinned to its
// CPU at SCHED_IDLE (policy 5) that uses that CPU, and stop ends them.
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
	self, _ := os.Executable()
	found := map[string]bool{}
	deadline := time.Now().Add(5 * time.Second)
	for len(found) < 2 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		tasks, _ := filepath.Glob("/proc/[0-9]*/task/[0-9]*")
		for _, task := range tasks {
			pid := strings.Split(task, "/")[2]
			if exe, _ := os.Readlink("/proc/" + pid + "/exe"); exe != self || pid == strconv.Itoa(os.Getpid()) {
				continue
			}
			sched, _ := os.ReadFile(task + "/sched")
			status, _ := os.ReadFile(task + "/status")
			if !strings.Contains(string(sched), "policy") || !policyIdle(string(sched)) {
				continue
			}
			for _, line := range strings.Split(string(status), "\n") {
				if cpus, ok := strings.CutPrefix(line, "Cpus_allowed_list:"); ok {
					found[strings.TrimSpace(cpus)] = true
				}
			}
		}
	}
	if !found["0"] || !found["1"] {
		t.Fatalf("SCHED_IDLE threads of the spinners found on CPUs %v, want 0 and 1", found)
	}
	stop()
	stopped = true
	tasks, _ := filepath.Glob("/proc/[0-9]*/exe")
	for _, exe := range tasks {
		pid := strings.Split(exe, "/")[2]
		if target, _ := os.Readlink(exe); target == self && pid != strconv.Itoa(os.Getpid()) {
			if env, _ := os.ReadFile("/proc/" + pid + "/environ"); strings.Contains(string(env), spinEnv) {
				t.Errorf("spinner %s still runs after stop", pid)
			}
		}
	}
}

func policyIdle(sched string) bool {
	for _, line := range strings.Split(sched, "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[0] == "policy" {
			return f[2] == "5"
		}
	}
	return false
}
