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

	"golang.org/x/sys/unix"

	"github.com/xvswitch/xvswitch/test/hostprobe"
)

// spinEnv names the CPU a re-executed xvs-bench spins on.
const spinEnv = "XVS_BENCH_SPIN_CPU"

// startSpinners starts one spinner process per CPU (xvs-bench itself,
// re-executed) and returns a function that stops them. They die with the
// bench if it is killed: their parent-death signal is tied to the thread
// that started them, so that thread is one kept for them (locked, alive
// until stop), not whichever thread the caller runs on, which the runtime
// may end earlier.
func startSpinners(cpus []int) (func(), error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
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
			c := exec.Command(self)
			c.Env = append(os.Environ(), spinEnv+"="+strconv.Itoa(cpu), "GOMAXPROCS=1")
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

// spinIfAsked is the spinner's life, when the environment asks for one:
// pinned to its CPU at SCHED_IDLE, it loops until killed.
func spinIfAsked() {
	v, ok := os.LookupEnv(spinEnv)
	if !ok {
		return
	}
	cpu, err := strconv.Atoi(v)
	if err == nil {
		runtime.LockOSThread()
		_, err = hostprobe.PinThread(cpu)
	}
	if err == nil {
		err = unix.SchedSetAttr(0, &unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_IDLE}, 0)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "xvs-bench spinner: %v\n", err)
		os.Exit(1)
	}
	//lint:ignore SA5002 spinning is the spinner's job: at SCHED_IDLE it uses only what nothing else wants
	for {
	}
}
