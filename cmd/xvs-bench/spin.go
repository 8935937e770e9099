package main

// Keeping the vCPUs busy. On a virtual machine a vCPU with nothing to run
// halts, and its host thread sleeps: the host may give the core to
// someone else, and when the vCPU has work again it waits for it, which
// the guest sees as steal time (steal.go). Both systems poll flat out,
// but a Go switch's worker thread blocks for a moment whenever the
// runtime preempts it (sysmon, every 10 ms of running: a locked
// goroutine hands its P to another thread and waits to get it back;
// docs/measuring.md), and then its CPU can halt. Measured on 2026-12-03:
// xvswitch's runs lost 55/49 ms of 2 s windows to steal on CPUs 0/1
// (mean of 54 runs) against DPDK's 20/31 ms, and with a SCHED_IDLE
// spinner on each CPU 19/20 ms against 7/6 (means of 80 runs). On a host's own
// cores a halted CPU wakes in microseconds; here it is the hypervisor's
// artefact, not the switch's cost, so the bench keeps a spinner on both
// CPUs for its whole run (-keep-cpus-busy): SCHED_IDLE runs only when
// nothing else on its CPU can, so it takes no time from either system.

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"syscall"
)

// spinEnv marks a spinner process (its value: the CPU it spins on), so
// that it can be found.
const spinEnv = "XVS_BENCH_SPIN_CPU"

// spinCommand is a spinner: a shell loop of builtins, pinned to cpu
// (taskset) at SCHED_IDLE (chrt -i 0; util-linux, in every Debian), every
// thread of it. It was a re-executed xvs-bench until 2026-12-06: its
// spinning thread was SCHED_IDLE, but its Go runtime's threads were not
// (sysmon, and the thread a preempted locked goroutine hands its P to), and
// they preempted the switch's worker on its CPU 51-198 times a second for
// 20-76 us each (perf sched_switch on that CPU, 1 s, three runs: the
// worker switched out runnable, a spinner's thread next); with the shell,
// once in a 1 s trace (the SCHED_IDLE share, one slice of ~4 ms). DPDK's
// lcore met the same. A shell has one thread and no runtime.
func spinCommand(cpu int) *exec.Cmd {
	c := exec.Command("taskset", "-c", strconv.Itoa(cpu), "chrt", "-i", "0", "sh", "-c", "while :; do :; done")
	c.Env = append(os.Environ(), spinEnv+"="+strconv.Itoa(cpu))
	return c
}

// startSpinners starts one spinner process per CPU and returns a function
// that stops them. They die with the bench if it is killed: their
// parent-death signal (kept across taskset's and chrt's exec) is tied to
// the thread that started them, so that thread is one kept for them
// (locked, alive until stop), not whichever thread the caller runs on,
// which the runtime may end earlier.
func startSpinners(cpus []int) (func(), error) {
	started := make(chan error)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		var cmds []*exec.Cmd
		defer func() {
			for _, c := range cmds {
				_ = c.Process.Kill()
				_ = c.Wait()
			}
		}()
		for _, cpu := range cpus {
			c := spinCommand(cpu)
			c.Stderr = os.Stderr
			c.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
			if err := c.Start(); err != nil {
				started <- fmt.Errorf("spinner on CPU %d: %w", cpu, err)
				return
			}
			cmds = append(cmds, c)
		}
		started <- nil
		<-stop
	}()
	if err := <-started; err != nil {
		<-done
		return nil, err
	}
	return func() { close(stop); <-done }, nil
}
