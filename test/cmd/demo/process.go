package main

import (
	"bufio"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// process is a program the demo runs for the length of the demo (xvswitch,
// QEMU). It gets its own process group, so a Ctrl-C in the terminal
// reaches the demo alone and the demo stops its programs itself, in order
// (xvswitch first, so it detaches XDP and removes its pins while the
// topology still exists), on every way out.
type process struct {
	name   string
	cmd    *exec.Cmd
	exited chan struct{}
	err    error // Wait's, valid once exited is closed
}

// start runs name with args, its stdout and stderr to out, and registers
// its stop (sig, then SIGKILL after grace) as a cleanup.
func start(s *session, out io.Writer, sig syscall.Signal, grace time.Duration, name string, args ...string) *process {
	p := &process{name: name, cmd: exec.Command(name, args...), exited: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = out, out
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := p.cmd.Start(); err != nil {
		s.Fatalf("start %s: %v", name, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.exited)
	}()
	s.Cleanup(func() { p.stop(s, sig, grace) })
	return p
}

// running reports whether the process has not exited yet.
func (p *process) running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// stop signals the process and waits up to grace for it to exit, then
// kills it. It is idempotent.
func (p *process) stop(s *session, sig syscall.Signal, grace time.Duration) {
	if !p.running() {
		return
	}
	_ = p.cmd.Process.Signal(sig)
	select {
	case <-p.exited:
	case <-time.After(grace):
		s.Errorf("%s did not exit within %v of %v: killed", p.name, grace, sig)
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

// prefixWriter returns a writer that copies each line to out behind
// prefix, for a program's log interleaved with the demo's narration.
func prefixWriter(out io.Writer, prefix string) io.WriteCloser {
	r, w := io.Pipe()
	go func() {
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			fmt.Fprintf(out, "%s%s\n", prefix, sc.Text())
		}
		_, _ = io.Copy(io.Discard, r)
	}()
	return w
}

// shellLine is a command line as a user would type it (arguments with
// characters the shell treats specially in single quotes).
func shellLine(name string, args ...string) string {
	q := []string{name}
	for _, a := range args {
		if a == "" || strings.ContainsAny(a, " \t'\"\\$&;|<>()*?[]#~`!{}") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		q = append(q, a)
	}
	return strings.Join(q, " ")
}
