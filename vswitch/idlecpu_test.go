package vswitch

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/xvswitch/xvswitch/portspec"
	"github.com/xvswitch/xvswitch/test/netns"
	"github.com/xvswitch/xvswitch/test/require"
	"github.com/xvswitch/xvswitch/vhost/vhosttest"
)

// processCPU is the on-CPU time of every thread of this process so far
// (/proc/self/task/*/schedstat, first field, nanoseconds).
func processCPU(t *testing.T) time.Duration {
	t.Helper()
	files, err := filepath.Glob("/proc/self/task/*/schedstat")
	if err != nil {
		t.Fatal(err)
	}
	var sum time.Duration
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // a thread that ended meanwhile
		}
		if ns, err := strconv.ParseInt(strings.Fields(string(b))[0], 10, 64); err == nil {
			sum += time.Duration(ns)
		}
	}
	return sum
}

// TestIdleSwitchCPU measures what an idle switch costs: a NIC (a veth)
// and a connected guest, no traffic, the CPU time of the whole test
// process (the switch, the guest's in-process front-end, the test) over a
// window (5 s; XVS_IDLE_WINDOW=30s for the bench's measure), and reports
// it with the workers' wake-ups. The goal is under 1% of a core; the test
// fails only far above that (5%): timing on a shared machine is noisy,
// and what it catches is an idle switch that polls or ticks.
func TestIdleSwitchCPU(t *testing.T) {
	require.Root(t)
	window := 5 * time.Second
	if v := os.Getenv("XVS_IDLE_WINDOW"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("XVS_IDLE_WINDOW=%q: %v", v, err)
		}
		window = d
	} else if testing.Short() {
		window = 3 * time.Second
	}
	v := netns.NewVeth(t, netns.VethOptions{InnerAddr: "10.93.0.1/24"})
	s := startTestSwitch(t, Config{Workers: 1})
	if err := s.AddNIC(portspec.NIC{Name: v.Outer, Ifname: v.Outer, Mode: portspec.ModeCopy}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.removeAll)
	addGuest(t, s, "idle-vm", 0x0252_5400_0093, vhosttest.Options{Packed: true})
	sleeping(t, s)
	// Let what a new interface sends (IPv6 DAD, router solicitations) pass.
	time.Sleep(time.Second)
	w := s.workers[0]
	sleeps0, cpu0, start := w.sleeps.Load(), processCPU(t), time.Now()
	time.Sleep(window)
	cpu, took, wakes := processCPU(t)-cpu0, time.Since(start), w.sleeps.Load()-sleeps0
	share := float64(cpu) / float64(took) * 100
	t.Logf("idle switch (NIC + connected guest): %v of CPU in %v = %.2f%% of a core; the worker slept %d times (%.1f/s)",
		cpu.Round(time.Microsecond), took.Round(time.Millisecond), share, wakes, float64(wakes)/took.Seconds())
	if share > 5 {
		t.Errorf("an idle switch used %.2f%% of a core (goal: under 1%%)", share)
	}
}
