// Command xvs-bench measures xvswitch side by side with DPDK's testpmd on
// the same machine, in one run, alternating the two systems case by case
// (xvswitch, DPDK, xvswitch, DPDK, ...), and writes the results as JSON, a
// Markdown table and a PNG chart. `make bench` runs it in full; its smoke
// mode (a fraction of a second per scenario) runs in the test suite so the
// harness cannot rot.
//
// Scenarios (as listed in BENCHMARKS.md), for 64- and 1518-byte frames and packed and split
// rings: 1 VM -> switch, 2 switch -> VM, 3 VM -> VM (cross-connect and
// learning bridge), 4 NIC -> VM, 5 VM -> NIC, 6 NIC <-> VM round-trip
// latency, 7 idle CPU; scenarios 4 and 5 run xvswitch twice, on its copy
// path and on its zero-copy path (the guest's port owning a NIC queue),
// beside DPDK, and report CPU time per frame and the path counters (see
// zerocopy.go). "VM" is DPDK testpmd with virtio-user ports, "NIC"
// a veth pair whose far end is in a network namespace. It needs root,
// dpdk-testpmd (Debian's dpdk-dev and PMD packages), ip and taskset.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// options are the command line.
type options struct {
	out       string
	xvswitch  string
	scenarios []int
	sizes     []int
	rings     []string
	modes     []string // VM -> VM: xconnect, bridge
	paths     []string // NIC -> VM, VM -> NIC: xvswitch's copy and zero-copy paths
	rounds    int
	// latencyRounds and probes: scenario 6's rounds, and the round
	// trips each of its runs measures.
	latencyRounds int
	probes        int
	warmup        time.Duration
	duration      time.Duration
	// runtimeCPUs is xvswitch's process mask (taskset), where the Go
	// runtime's threads run; its worker pins itself to switchCPU (--cpus).
	// Empty: not pinned.
	runtimeCPUs string
	// keepBusy: a SCHED_IDLE spinner on each of the bench's CPUs for the
	// whole run, so that neither vCPU halts (spin.go).
	keepBusy bool
	// proberRT: scenario 6's prober thread at SCHED_FIFO (latency.go).
	proberRT bool
	// hugeDir: a hugetlbfs mount the guests' and DPDK's testpmds take
	// their memory from (2 MiB pages), instead of 4 KiB pages.
	hugeDir string
	profile string // a directory: profile the worker in scenarios 1-3 and 5
	// profileDuration is the profiled run's window.
	profileDuration time.Duration
	smoke           bool
	// idleAfter, if set, is the switch under test's --idle-after: 1ns
	// lets its worker sleep whenever its queues are empty, so that its
	// CPU time is the frames' work rather than empty polls.
	idleAfter string
	genCPU    int      // NIC -> VM: the CPU of the wire-side generator
	keep      bool     // keep every run's work directory (testpmd logs, sockets)
	replot    string   // a bench.json to render again instead of measuring
	args      []string // as given, for the record
}

// smokeOptions is the smoke run: one small case per scenario (64 B, split
// ring, VM -> VM cross-connected, NIC <-> VM on both of xvswitch's paths),
// one round, a fraction of a second each.
func smokeOptions(out string) options {
	return options{out: out, scenarios: []int{1, 2, 3, 4, 5, 6, 7}, sizes: []int{64}, rings: []string{"split"}, modes: []string{"xconnect"}, paths: []string{pathCopy, pathZerocopy},
		genCPU: switchCPU, rounds: 1, latencyRounds: 1, probes: 1000, runtimeCPUs: strconv.Itoa(guestCPU),
		warmup: 300 * time.Millisecond, duration: 500 * time.Millisecond, profileDuration: 500 * time.Millisecond, smoke: true}
}

func parseFlags(args []string) (options, error) {
	fs := flag.NewFlagSet("xvs-bench", flag.ContinueOnError)
	var o options
	var scen, sizes, rings, modes, paths string
	fs.StringVar(&o.out, "out", "results", "directory for bench.json, bench.md and bench.png")
	fs.StringVar(&o.xvswitch, "xvswitch", "", "the xvswitch binary (default: go build ./cmd/xvswitch into a temporary directory)")
	fs.StringVar(&scen, "scenarios", "1,2,3,4,5,6,7", "scenarios to run")
	fs.StringVar(&sizes, "sizes", "64,1518", "frame sizes (bytes, Ethernet header to payload end, no FCS)")
	fs.StringVar(&rings, "rings", "packed,split", "virtqueue kinds")
	fs.StringVar(&modes, "modes", "xconnect,bridge", "VM -> VM forwarding modes")
	fs.StringVar(&paths, "paths", "copy,zerocopy", "NIC -> VM and VM -> NIC: xvswitch's paths, each a system of its own beside DPDK (zerocopy: the guest's port owns a NIC queue, own=)")
	fs.IntVar(&o.rounds, "rounds", 5, "xvswitch/DPDK alternations per case (the table gives each system's median and best)")
	fs.IntVar(&o.latencyRounds, "latency-rounds", 3, "xvswitch/DPDK alternations of the latency case (scenario 6)")
	fs.IntVar(&o.probes, "probes", 10000, "latency: round trips measured per run")
	fs.DurationVar(&o.warmup, "warmup", time.Second, "traffic runs this long before the measurement window")
	fs.DurationVar(&o.duration, "duration", 2*time.Second, "measurement window per run (rates and idle)")
	// Not pinned by default: this machine's other CPU runs the guest's
	// busy testpmd, and a runtime pinned there makes the worker wait for
	// it each time sysmon preempts it (docs/measuring.md, "But the
	// runtime's CPUs must have room").
	fs.StringVar(&o.runtimeCPUs, "runtime-cpus", "", "CPUs of xvswitch's process (taskset; its Go runtime's threads), its worker pinned to CPU 1 by --cpus; empty (the default): not pinned, the runtime may use the worker's CPU while the worker is parked")
	fs.StringVar(&o.hugeDir, "huge-dir", "", "a hugetlbfs mount with free 2 MiB pages (vm.nr_hugepages; 256 MiB per testpmd, two or three at a time): the guests' memory and DPDK's come from it, as a QEMU guest's does when hugepages back it, instead of 4 KiB pages (--no-huge)")
	fs.BoolVar(&o.proberRT, "prober-rt", true, "latency (scenario 6): run the prober's thread at SCHED_FIFO priority 1, so that it does not wait behind the guest's busy testpmd on their shared CPU for a scheduler slice (it blocks between probes: it takes that CPU only to send and to read)")
	fs.BoolVar(&o.keepBusy, "keep-cpus-busy", true, "run a SCHED_IDLE spinner on CPUs 0 and 1 for the whole bench, so that neither vCPU halts when the threads on it block (on a virtual machine a halted vCPU is one the hypervisor may give away: steal time); the spinner runs only when nothing else on its CPU can")
	fs.DurationVar(&o.profileDuration, "profile-duration", 5*time.Second, "-profile: the profiled run's measured window")
	fs.StringVar(&o.profile, "profile", "", "profile xvswitch's worker with perf in one extra run per case of scenarios 1-3 and 5, writing `DIR`/profile-<scenario>-<ring>-<size>.txt")
	fs.StringVar(&o.idleAfter, "idle-after", "", "the --idle-after of the xvswitch under test (default: xvswitch's, 10ms); 1ns: its worker sleeps in epoll after 128 empty polls, so its CPU time per frame counts work, not empty polls")
	fs.IntVar(&o.genCPU, "gen-cpu", switchCPU, "NIC -> VM: the CPU of the wire-side generator (1 shares the switch's, 0 the guest's)")
	fs.BoolVar(&o.keep, "keep", false, "keep every run's work directory (testpmd logs); failed runs' are always kept")
	fs.StringVar(&o.replot, "replot", "", "render the table and chart of an existing bench.json into -out, measuring nothing")
	smoke := fs.Bool("smoke", false, "smoke run: scenarios 1-7, 64 B, split ring, VM -> VM cross-connected, NIC <-> VM on both paths, one round, 0.5 s windows (overrides the others but -out, -xvswitch, -keep, -gen-cpu, -runtime-cpus and -profile)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if *smoke {
		so := smokeOptions(o.out)
		so.xvswitch = o.xvswitch
		so.keep = o.keep
		so.genCPU = o.genCPU
		so.profile = o.profile
		// The smoke run keeps the runtime off the worker's CPU (its test
		// checks the placement) unless told otherwise.
		fs.Visit(func(f *flag.Flag) {
			if f.Name == "runtime-cpus" {
				so.runtimeCPUs = o.runtimeCPUs
			}
		})
		so.idleAfter = o.idleAfter
		so.args = args
		return so, nil
	}
	o.args = args
	for _, s := range strings.Split(scen, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || titles[n] == "" {
			return o, fmt.Errorf("-scenarios: %q: want numbers 1-7", s)
		}
		o.scenarios = append(o.scenarios, n)
	}
	for _, s := range strings.Split(sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 64 || n > 1518 {
			return o, fmt.Errorf("-sizes: %q: want 64..1518", s)
		}
		o.sizes = append(o.sizes, n)
	}
	for _, s := range strings.Split(rings, ",") {
		if s != "packed" && s != "split" {
			return o, fmt.Errorf("-rings: %q: want packed or split", s)
		}
		o.rings = append(o.rings, s)
	}
	for _, s := range strings.Split(modes, ",") {
		if s != "xconnect" && s != "bridge" {
			return o, fmt.Errorf("-modes: %q: want xconnect or bridge", s)
		}
		o.modes = append(o.modes, s)
	}
	for _, s := range strings.Split(paths, ",") {
		if s != pathCopy && s != pathZerocopy {
			return o, fmt.Errorf("-paths: %q: want copy or zerocopy", s)
		}
		o.paths = append(o.paths, s)
	}
	if o.rounds < 1 || o.latencyRounds < 1 || o.probes < 1 || o.duration <= 0 || o.profileDuration <= 0 || o.warmup < 0 {
		return o, fmt.Errorf("-rounds, -latency-rounds and -probes must be >= 1, -duration and -profile-duration > 0")
	}
	if o.idleAfter != "" {
		if _, err := time.ParseDuration(o.idleAfter); err != nil {
			return o, fmt.Errorf("-idle-after: %v", err)
		}
	}
	if o.runtimeCPUs != "" {
		cpus, err := parseCPUList(o.runtimeCPUs)
		if err != nil || len(cpus) == 0 {
			return o, fmt.Errorf("-runtime-cpus: %q: want a CPU list such as 0 or 0,2-3", o.runtimeCPUs)
		}
		for _, c := range cpus {
			if c == switchCPU {
				return o, fmt.Errorf("-runtime-cpus: %q holds the worker's CPU %d", o.runtimeCPUs, switchCPU)
			}
		}
	}
	return o, nil
}

func main() {
	o, err := parseFlags(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "xvs-bench:", err)
		os.Exit(2)
	}
	var rep *Report
	if o.replot != "" {
		rep, err = replot(o.replot, o.out)
	} else {
		rep, err = runBench(o, os.Stderr)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "xvs-bench:", err)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "xvs-bench: wrote %s\n", strings.Join(rep.Files, ", "))
	if rep.Failed > 0 {
		fmt.Fprintf(os.Stderr, "xvs-bench: %d runs failed (see their errors in the table and JSON)\n", rep.Failed)
		os.Exit(1)
	}
}

// runBench runs every case of o and writes the report files.
func runBench(o options, log io.Writer) (*Report, error) {
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("needs root (namespaces, XDP, AF_XDP, DPDK)")
	}
	for _, c := range []string{"dpdk-testpmd", "stdbuf", "taskset", "ip"} {
		if _, err := exec.LookPath(c); err != nil {
			return nil, fmt.Errorf("needs %s on PATH", c)
		}
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return nil, err
	}
	if o.profile != "" {
		if err := os.MkdirAll(o.profile, 0o755); err != nil {
			return nil, err
		}
		if err := checkPerf(o.profile); err != nil {
			return nil, err
		}
	}
	logDir, err := os.MkdirTemp("", "xvs-bench-logs-")
	if err != nil {
		return nil, err
	}
	if o.keepBusy {
		stop, err := startSpinners([]int{guestCPU, switchCPU})
		if err != nil {
			return nil, err
		}
		defer stop()
	}
	b := &bench{opt: o, xvswitch: o.xvswitch, logDir: logDir, log: log}
	if b.xvswitch == "" {
		if b.xvswitch, err = buildXvswitch(logDir); err != nil {
			return nil, err
		}
	}
	if b.xvswitch, err = filepath.Abs(b.xvswitch); err != nil {
		return nil, err
	}
	rep := newReport(o)
	cases := plan(o.scenarios, o.sizes, o.rings, o.modes, o.paths)
	// Ctrl-C (or SIGTERM) lets the current run finish and tear down its
	// namespaces and processes, then writes what was measured; a second
	// one exits at once (children die with us, namespaces may remain).
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	var interrupted atomic.Bool
	go func() {
		if _, ok := <-sigs; !ok {
			return
		}
		interrupted.Store(true)
		fmt.Fprintln(log, "xvs-bench: interrupted: finishing the current run (again to exit now)")
		if _, ok := <-sigs; ok {
			os.Exit(130)
		}
	}()
	fmt.Fprintf(log, "xvs-bench: %d cases x %d rounds (latency: %d) x 2-3 systems; load %.2f; process logs in %s\n", len(cases), o.rounds, o.latencyRounds, rep.LoadStart[0], logDir)
	start := time.Now()
	for i, c := range cases {
		fmt.Fprintf(log, "[%d/%d] %s (%s)\n", i+1, len(cases), c.ID, time.Since(start).Round(time.Second))
		res := b.runCase(c, &interrupted)
		rep.add(res)
		if interrupted.Load() {
			rep.Interrupted = true
			break
		}
	}
	rep.finish(time.Since(start))
	if err := rep.write(o.out); err != nil {
		return rep, err
	}
	return rep, nil
}

// buildXvswitch builds the daemon from this module into dir.
func buildXvswitch(dir string) (string, error) {
	gomod, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil || strings.TrimSpace(string(gomod)) == "" || strings.TrimSpace(string(gomod)) == os.DevNull {
		return "", fmt.Errorf("building xvswitch: not inside the module (go env GOMOD: %v); pass -xvswitch", err)
	}
	bin := filepath.Join(dir, "xvswitch")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/xvswitch")
	cmd.Dir = filepath.Dir(strings.TrimSpace(string(gomod)))
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/xvswitch: %v\n%s", err, out)
	}
	return bin, nil
}

// replot renders an earlier run's JSON again.
func replot(path, out string) (*Report, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var rep Report
	if err := json.Unmarshal(b, &rep); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return nil, err
	}
	rep.Failed = 0 // a replot measured nothing, so nothing failed now
	// The summaries again from the runs, so a report written before the
	// medians and ratios of both kinds renders with them.
	for i := range rep.Results {
		rep.Results[i].summarize()
	}
	return &rep, rep.write(out)
}
