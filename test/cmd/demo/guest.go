package main

import (
	"fmt"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/xvswitch/xvswitch/test/qemu"
)

// guest is the demo's QEMU guest: test/qemu's cached kernel and initramfs
// with the run's script (qemu.PrepareBoot) on test/qemu's QEMU command line
// (qemu.CommandLine, the one every QEMU test and docs/vms.md use), run by
// the demo itself so it owns the process and can read the guest's reports
// while it runs.
type guest struct {
	boot             *qemu.Boot
	args             []string
	console, reports string
	proc             *process
	started          time.Time
}

// prepareGuest builds the run's initrd and QEMU's command line.
func prepareGuest(s *session, cfg qemu.GuestConfig) *guest {
	b := qemu.PrepareBoot(s, cfg, s.dir)
	g := &guest{boot: b, console: s.path("console.log"), reports: s.path("reports.log")}
	g.args = qemu.CommandLine(cfg, b.Kernel, b.Initrd, g.console, g.reports)
	return g
}

// start runs QEMU, its own output to qemu.log.
func (g *guest) start(s *session) {
	log, err := os.Create(s.path("qemu.log"))
	if err != nil {
		s.Fatalf("qemu log: %v", err)
	}
	s.Cleanup(func() { log.Close() })
	g.started = time.Now()
	// SIGTERM: QEMU exits at once and removes its server socket.
	g.proc = start(s, log, syscall.SIGTERM, 5*time.Second, "qemu-system-x86_64", g.args...)
}

// run is what the guest reported so far.
func (g *guest) run() *qemu.GuestRun {
	return g.boot.Run(g.console, g.reports, time.Since(g.started))
}

// waitFor polls the guest's reports until cond holds, QEMU exits, the
// session ends or timeout passes; it returns whether cond held.
func (g *guest) waitFor(s *session, timeout time.Duration, cond func(r *qemu.GuestRun) bool) bool {
	deadline := time.After(timeout)
	for {
		if cond(g.run()) {
			return true
		}
		select {
		case <-g.proc.exited:
			return cond(g.run())
		case <-s.ctx.Done():
			return false
		case <-deadline:
			return false
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// ready reports whether the guest listens for the named GuestTCPReceive.
func ready(name string) func(*qemu.GuestRun) bool {
	return func(r *qemu.GuestRun) bool { return strings.Contains(r.Reports, "XVS-READY name="+name+" ") }
}

// reported reports whether the guest gave the named command's result.
func reported(name string) func(*qemu.GuestRun) bool {
	return func(r *qemu.GuestRun) bool { return !r.Result(name).Missing }
}

// explain is the end of the guest's console and reports and QEMU's
// output, for a demo that failed on the guest's side.
func (g *guest) explain(s *session) string {
	r := g.run()
	q, _ := os.ReadFile(s.path("qemu.log"))
	return fmt.Sprintf("guest console (last lines):\n%s\nguest reports:\n%s\nqemu:\n%s",
		tail(r.Console, 15), tail(r.Reports, 15), tail(string(q), 10))
}

func tail(s string, n int) string {
	l := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, "\n")
}
