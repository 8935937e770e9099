package testpmd

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/xvswitch/xvswitch/test/require"
)

// Process is a running dpdk-testpmd. Its output goes to LogPath (shown in
// the test log when the test fails) and is parsed as it arrives.
type Process struct {
	cfg Config

	// LogPath is the file testpmd's stdout and stderr go to.
	LogPath string
	// Prefix is the DPDK --file-prefix (unique per instance).
	Prefix string

	cmd   *exec.Cmd
	stdin io.WriteCloser // interactive mode only
	inMu  sync.Mutex     // serialises writes to stdin

	mu      sync.Mutex
	stats   map[int]PortStats
	rounds  int // complete NIC statistics blocks seen
	macs    map[int]net.HardwareAddr
	fwd     *FwdStats
	fwdSeen int // forward statistics blocks seen
	output  bytes.Buffer
	prompt  bool   // interactive: a "testpmd> " prompt has been seen
	failure string // first line saying a port could not be set up
	ready   bool

	exited  chan struct{} // closed when the process has exited
	exitErr error
	// Stuck says how Stop left a testpmd whose Wait had not returned
	// after SIGKILL (stuck.go); empty when it went.
	Stuck    string
	readDone chan struct{} // closed when all output has been read

	stopOnce  sync.Once
	stopStats chan struct{}
	final     FwdStats
	finalErr  error
}

// ErrHarness is wrapped by every error the testpmd harness returns.
var ErrHarness = errors.New("testpmd")

// Start starts testpmd and waits until its ports are up and (in
// non-interactive mode) forwarding has started, or (NoWait) only until its
// listening sockets exist. It is stopped in t.Cleanup. Skips (or fails,
// see require.SkipOrFail) without root or dpdk-testpmd.
func Start(t testing.TB, cfg Config) *Process {
	t.Helper()
	require.Root(t)
	require.Commands(t, "dpdk-testpmd", "stdbuf")
	cfg.setDefaults()
	dir, err := PMDDir()
	if err != nil {
		t.Fatalf("%v", err)
	}
	tp := &Process{
		cfg:       cfg,
		Prefix:    filePrefix(cfg.Name),
		stats:     map[int]PortStats{},
		macs:      map[int]net.HardwareAddr{},
		exited:    make(chan struct{}),
		readDone:  make(chan struct{}),
		stopStats: make(chan struct{}),
	}
	args, err := cfg.args(dir, tp.Prefix)
	if err != nil {
		t.Fatalf("%v: %v", ErrHarness, err)
	}
	// The log lives in the test's temp dir; TempDir's own cleanup was
	// registered first, so it runs after ours and the log is still there
	// when a failed test prints it.
	tp.LogPath = filepath.Join(t.TempDir(), "testpmd-"+cfg.Name+".log")
	logf, err := os.Create(tp.LogPath)
	if err != nil {
		t.Fatalf("%v", err)
	}
	// stdbuf: testpmd's stdout is block-buffered into a pipe, which would
	// hold statistics back for kilobytes.
	tp.cmd = exec.Command("stdbuf", append([]string{"-oL", "-eL", "dpdk-testpmd"}, args...)...)
	// Pdeathsig: a test binary that dies (a -timeout panic, a kill) must
	// not leave busy-polling testpmds behind on a 2-CPU machine. It fires
	// when the forking thread exits, so Start and Wait run on one locked
	// thread below.
	tp.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatalf("%v", err)
	}
	tp.cmd.Stdout, tp.cmd.Stderr = pw, pw
	if cfg.Interactive {
		if tp.stdin, err = tp.cmd.StdinPipe(); err != nil {
			t.Fatalf("%v", err)
		}
	}
	fmt.Fprintf(logf, "# dpdk-testpmd %s\n", strings.Join(args, " "))
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := tp.cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		tp.exitErr = tp.cmd.Wait()
		close(tp.exited)
	}()
	if err := <-started; err != nil {
		pr.Close()
		pw.Close()
		logf.Close()
		t.Fatalf("%v: start: %v", ErrHarness, err)
	}
	pw.Close()
	go tp.read(pr, logf)
	t.Cleanup(func() {
		if _, err := tp.Stop(); err != nil {
			t.Logf("testpmd %s: %v", cfg.Name, err)
		}
		if tp.Stuck != "" {
			t.Logf("testpmd %s: stopped by %s", cfg.Name, tp.Stuck)
		}
		if t.Failed() {
			t.Logf("testpmd %s log (%s):\n%s", cfg.Name, tp.LogPath, tp.logExcerpt())
		}
		// EAL leaves its runtime files (config, mp socket) behind.
		_ = os.RemoveAll(filepath.Join("/var/run/dpdk", tp.Prefix))
	})
	if err := tp.waitSockets(cfg.ReadyTimeout); err != nil {
		t.Fatalf("%v", err)
	}
	if !cfg.NoWait {
		if err := tp.WaitReady(cfg.ReadyTimeout); err != nil {
			t.Fatalf("%v", err)
		}
	}
	return tp
}

// filePrefix returns a DPDK --file-prefix unique to one instance: EAL
// keeps its runtime files in /var/run/dpdk/<prefix>, and two processes
// with one prefix would take each other for primary and secondary.
func filePrefix(name string) string {
	clean := []byte("xvs-")
	for i := 0; i < len(name) && i < 16; i++ {
		c := name[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' {
			clean = append(clean, c)
		}
	}
	var r [4]byte
	_, _ = rand.Read(r[:])
	return string(clean) + "-" + hex.EncodeToString(r[:])
}

// read copies testpmd's output to the log and feeds the parser. Lines are
// split by hand because an interactive prompt ("testpmd> ") has no newline.
func (tp *Process) read(r io.ReadCloser, logf *os.File) {
	defer close(tp.readDone)
	defer r.Close()
	defer logf.Close()
	p := &statsParser{
		onPort: func(port int, s PortStats) {
			s.At = time.Now()
			tp.stats[port] = s
			tp.rounds++
		},
		onFwd: func(f FwdStats) {
			tp.fwd = &f
			tp.fwdSeen++
		},
		onMAC: func(port int, mac string) {
			if hw, err := net.ParseMAC(mac); err == nil {
				tp.macs[port] = hw
			}
		},
	}
	buf := make([]byte, 64<<10)
	var pending []byte
	for {
		n, err := r.Read(buf)
		if n > 0 {
			_, _ = logf.Write(buf[:n])
			tp.mu.Lock()
			tp.output.Write(buf[:n])
			pending = append(pending, buf[:n]...)
			for {
				i := bytes.IndexByte(pending, '\n')
				if i < 0 {
					break
				}
				line := string(pending[:i])
				pending = pending[i+1:]
				p.line(line)
				tp.notePrompt(line)
				tp.noteFailure(line)
			}
			tp.notePrompt(string(pending))
			tp.mu.Unlock()
		}
		if err != nil {
			return
		}
	}
}

// notePrompt records readiness signs; called with mu held.
func (tp *Process) notePrompt(s string) {
	if strings.Contains(s, "testpmd> ") {
		tp.prompt = true
	}
}

// failureSigns are testpmd's words for a port it could not probe,
// configure or start. It keeps running without the port, so readiness
// would otherwise only time out.
var failureSigns = []string{
	"probe failed", "No probed ethernet devices", "Fail to configure port",
	"Fail to start port", "Fail to setup",
}

// noteFailure records the first failure line; called with mu held.
func (tp *Process) noteFailure(line string) {
	if tp.failure != "" {
		return
	}
	for _, s := range failureSigns {
		if strings.Contains(line, s) {
			tp.failure = strings.TrimSpace(line)
			return
		}
	}
}

// waitSockets waits until every socket testpmd listens on exists, so a
// peer started next can connect.
func (tp *Process) waitSockets(timeout time.Duration) error {
	var paths []string
	for _, p := range tp.cfg.Ports {
		if p.Kind == VhostUser && !p.Client || p.Kind == VirtioUser && p.Server {
			paths = append(paths, p.Path)
		}
	}
	return tp.waitFor(timeout, "listening sockets", func() bool {
		for _, p := range paths {
			if fi, err := os.Stat(p); err != nil || fi.Mode()&os.ModeSocket == 0 {
				return false
			}
		}
		return true
	})
}

// WaitReady waits until all ports are probed and configured and, without
// Interactive, forwarding runs (the first statistics block is out); with
// Interactive, until the first prompt. It fails if testpmd probed fewer
// ports than configured (e.g. a virtio-user whose socket had no listener).
func (tp *Process) WaitReady(timeout time.Duration) error {
	err := tp.waitFor(timeout, "ports up", func() bool {
		if tp.failure != "" {
			return true
		}
		if tp.cfg.Interactive {
			return tp.prompt
		}
		return tp.rounds > 0
	})
	if err != nil {
		return err
	}
	tp.mu.Lock()
	n := len(tp.macs)
	failure := tp.failure
	already := tp.ready
	tp.ready = true
	tp.mu.Unlock()
	if failure != "" {
		return fmt.Errorf("%w %s: %q (log %s)", ErrHarness, tp.cfg.Name, failure, tp.LogPath)
	}
	if n < len(tp.cfg.Ports) {
		return fmt.Errorf("%w %s: %d of %d ports probed (see %s)", ErrHarness, tp.cfg.Name, n, len(tp.cfg.Ports), tp.LogPath)
	}
	if tp.cfg.Interactive && !already {
		go tp.pollStats()
	}
	return nil
}

// waitFor polls cond (called with mu held) until it holds, the process
// exits, or timeout.
func (tp *Process) waitFor(timeout time.Duration, what string, cond func() bool) error {
	deadline := time.Now().Add(timeout)
	for {
		tp.mu.Lock()
		ok := cond()
		tp.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-tp.exited:
			<-tp.readDone
			tp.mu.Lock()
			ok := cond()
			tp.mu.Unlock()
			if ok {
				return nil
			}
			// The log is shown by the cleanup if the test fails.
			return fmt.Errorf("%w %s exited (%v) while waiting for %s (log %s)",
				ErrHarness, tp.cfg.Name, tp.exitErr, what, tp.LogPath)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			// The log is shown by the cleanup if the test fails.
			return fmt.Errorf("%w %s: still waiting for %s after %v (log %s)",
				ErrHarness, tp.cfg.Name, what, timeout, tp.LogPath)
		}
	}
}

// pollStats asks an interactive testpmd for port statistics every
// StatsPeriod, so Stats and WaitStats work as in periodic mode.
func (tp *Process) pollStats() {
	tick := time.NewTicker(tp.cfg.StatsPeriod)
	defer tick.Stop()
	for {
		select {
		case <-tp.stopStats:
			return
		case <-tp.exited:
			return
		case <-tick.C:
			_ = tp.Cmd("show port stats all")
		}
	}
}

// Cmd writes one command line to an interactive testpmd ("start",
// "start tx_first 16", "stop", "show port stats all", ...).
func (tp *Process) Cmd(line string) error {
	if tp.stdin == nil {
		return fmt.Errorf("%w %s: Cmd needs Interactive", ErrHarness, tp.cfg.Name)
	}
	tp.inMu.Lock()
	defer tp.inMu.Unlock()
	_, err := io.WriteString(tp.stdin, line+"\n")
	return err
}

// WaitOutput waits until testpmd's output contains s.
func (tp *Process) WaitOutput(s string, timeout time.Duration) error {
	return tp.waitFor(timeout, fmt.Sprintf("%q in the output", s), func() bool {
		return bytes.Contains(tp.output.Bytes(), []byte(s))
	})
}

// Stats returns the latest periodic statistics per DPDK port ID (empty
// before the first block).
func (tp *Process) Stats() map[int]PortStats {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	m := make(map[int]PortStats, len(tp.stats))
	for k, v := range tp.stats {
		m[k] = v
	}
	return m
}

// WaitStats waits until cond holds for the latest statistics (checked at
// each new block), or fails after timeout with the last statistics seen.
func (tp *Process) WaitStats(cond func(map[int]PortStats) bool, timeout time.Duration) error {
	seen := -1
	return tp.waitFor(timeout, "the awaited port statistics", func() bool {
		if tp.rounds == seen {
			return false
		}
		seen = tp.rounds
		m := make(map[int]PortStats, len(tp.stats))
		for k, v := range tp.stats {
			m[k] = v
		}
		return cond(m)
	})
}

// MAC returns the MAC address testpmd reported for a port (nil if none):
// the source of the frames txonly sends from it.
func (tp *Process) MAC(port int) net.HardwareAddr {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	return tp.macs[port]
}

// StopForwarding (interactive only) sends "stop" and returns the forward
// statistics it prints. The process and its ports stay up: a receiver can
// drain what is in flight before it is stopped itself.
func (tp *Process) StopForwarding(timeout time.Duration) (FwdStats, error) {
	return tp.fwdStatsAfter("stop", timeout)
}

// ShowFwdStats (interactive only) returns the forward statistics since
// forwarding started ("show fwd stats all"), forwarding going on: the
// engine's own counts, among them the frames a port's transmit refused
// (TX-dropped), which the vhost PMD leaves out of its port statistics.
func (tp *Process) ShowFwdStats(timeout time.Duration) (FwdStats, error) {
	return tp.fwdStatsAfter("show fwd stats all", timeout)
}

// fwdStatsAfter sends cmd and returns the forward statistics printed next.
func (tp *Process) fwdStatsAfter(cmd string, timeout time.Duration) (FwdStats, error) {
	tp.mu.Lock()
	before := tp.fwdSeen
	tp.mu.Unlock()
	if err := tp.Cmd(cmd); err != nil {
		return FwdStats{}, err
	}
	err := tp.waitFor(timeout, "forward statistics", func() bool { return tp.fwdSeen > before })
	if err != nil {
		return FwdStats{}, err
	}
	tp.mu.Lock()
	defer tp.mu.Unlock()
	return *tp.fwd, nil
}

// Stop ends testpmd: "quit" in interactive mode, SIGINT otherwise (both
// stop forwarding and print the forward statistics), SIGINT again and then
// SIGKILL if it hangs. It returns the last forward statistics printed, or
// an error if there were none. Safe to call more than once.
func (tp *Process) Stop() (FwdStats, error) {
	tp.stopOnce.Do(func() {
		close(tp.stopStats)
		tp.final, tp.finalErr = tp.stop()
	})
	return tp.final, tp.finalErr
}

func (tp *Process) stop() (FwdStats, error) {
	exited := func(d time.Duration) bool {
		timer := time.NewTimer(d)
		defer timer.Stop()
		select {
		case <-tp.exited:
			return true
		default:
		}
		select {
		case <-tp.exited:
			return true
		case <-timer.C:
			return false
		}
	}
	tp.mu.Lock()
	prompt := tp.prompt
	tp.mu.Unlock()
	var how string
	switch {
	case exited(0):
		how = "had already exited"
	// Only a prompt reads commands: before it (e.g. a server-mode
	// virtio-user still waiting in probe) go straight to SIGINT.
	case tp.stdin != nil && prompt && tp.Cmd("quit") == nil && exited(10*time.Second):
		how = "quit"
	case tp.cmd.Process.Signal(os.Interrupt) == nil && exited(10*time.Second):
		how = "SIGINT"
	default:
		how = tp.kill(exited)
	}
	if tp.stdin != nil {
		_ = tp.stdin.Close()
	}
	select {
	case <-tp.readDone:
	case <-time.After(5 * time.Second):
		// A child holding the pipe open; the log is as complete as it gets.
	}
	tp.mu.Lock()
	defer tp.mu.Unlock()
	if tp.fwd == nil {
		exit := "none yet"
		if tp.Stuck == "" {
			exit = fmt.Sprint(tp.exitErr) // written before exited closed
		}
		return FwdStats{}, fmt.Errorf("%w %s: no forward statistics (stopped by %s, exit %s)", ErrHarness, tp.cfg.Name, how, exit)
	}
	return *tp.fwd, nil
}

// logExcerpt returns the log, or its head and tail when it is long.
func (tp *Process) logExcerpt() string {
	tp.mu.Lock()
	s := tp.output.String()
	tp.mu.Unlock()
	lines := strings.Split(s, "\n")
	if len(lines) <= 400 {
		return s
	}
	return strings.Join(lines[:100], "\n") + fmt.Sprintf("\n[... %d lines ...]\n", len(lines)-400) +
		strings.Join(lines[len(lines)-300:], "\n")
}
