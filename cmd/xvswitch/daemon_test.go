package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/xvswitch/xvswitch/ctl"
)

// Helpers that run the xvswitch binary under test as a daemon and drive
// it through its CLI, as a user would.

var xvswitchBin string

func TestMain(m *testing.M) {
	code := m.Run()
	if xvswitchBin != "" {
		os.RemoveAll(filepath.Dir(xvswitchBin))
	}
	os.Exit(code)
}

// buildXvswitch builds the binary under test once per test binary.
func buildXvswitch(t *testing.T) string {
	t.Helper()
	if xvswitchBin != "" {
		return xvswitchBin
	}
	dir, err := os.MkdirTemp("", "xvswitch-bin")
	if err != nil {
		t.Fatal(err)
	}
	// Tests run it as nobody too (unprivileged).
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "xvswitch")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	xvswitchBin = bin
	return bin
}

// runningDaemon is a running `xvswitch run`.
type runningDaemon struct {
	cmd  *exec.Cmd
	ctl  string
	log  *bytes.Buffer
	done chan error
}

func startDaemon(t *testing.T, args ...string) *runningDaemon {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "ctl.sock")
	return launchDaemon(t, sock, exec.Command(buildXvswitch(t), append([]string{"run", "--ctl", sock}, args...)...))
}

// launchDaemon starts cmd, an `xvswitch run` (or something that execs one)
// serving its control socket at sock, and waits until it answers there.
func launchDaemon(t *testing.T, sock string, cmd *exec.Cmd) *runningDaemon {
	t.Helper()
	d := &runningDaemon{cmd: cmd, ctl: sock, log: &bytes.Buffer{}, done: make(chan error, 1)}
	d.cmd.Stdout, d.cmd.Stderr = d.log, d.log
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { d.done <- d.cmd.Wait() }()
	t.Cleanup(func() {
		d.stop(t)
		if t.Failed() {
			t.Logf("xvswitch log:\n%s", d.log)
		}
	})
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := ctl.Call(d.ctl, ctl.Request{Op: "show-ports"}); err == nil {
			return d
		}
		select {
		case err := <-d.done:
			t.Fatalf("xvswitch exited: %v\n%s", err, d.log)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("xvswitch did not answer on %s\n%s", d.ctl, d.log)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stop sends SIGTERM and waits; it is idempotent.
func (d *runningDaemon) stop(t *testing.T) error {
	if d.cmd.ProcessState != nil {
		return nil
	}
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-d.done:
		d.done <- err
		return err
	case <-time.After(15 * time.Second):
		_ = d.cmd.Process.Kill()
		t.Errorf("xvswitch did not stop within 15 s of SIGTERM")
		return <-d.done
	}
}

// cli runs an xvswitch CLI command against the daemon.
func (d *runningDaemon) cli(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command(buildXvswitch(t), append(args, "--ctl", d.ctl)...).CombinedOutput()
	if err != nil {
		t.Fatalf("xvswitch %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func (d *runningDaemon) stats(t *testing.T) []ctl.PortCounters {
	t.Helper()
	var st []ctl.PortCounters
	if err := json.Unmarshal([]byte(d.cli(t, "show", "stats", "--json")), &st); err != nil {
		t.Fatal(err)
	}
	return st
}

// cpuTicks is the daemon's user+system CPU time in clock ticks.
func (d *runningDaemon) cpuTicks(t *testing.T) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", d.cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+2:]))
	u, _ := strconv.ParseInt(f[11], 10, 64)
	s, _ := strconv.ParseInt(f[12], 10, 64)
	return u + s
}

// checkBalance: across the switch, received + flood copies + segment
// copies (docs/offloads.md) = transmitted + dropped.
func checkBalance(t *testing.T, st []ctl.PortCounters) {
	t.Helper()
	var rx, tx, dropped, flood uint64
	for _, p := range st {
		rx += p.RxPackets
		tx += p.TxPackets
		flood += p.FloodCopies + p.SegmentCopies
		for _, n := range p.Drops {
			dropped += n
		}
	}
	if rx == 0 || rx+flood != tx+dropped {
		t.Errorf("accounting: rx %d + flood and segment copies %d != tx %d + dropped %d: %+v", rx, flood, tx, dropped, st)
	}
}

// ringName names a subtest by ring kind. (Not "packed=true": t.TempDir
// paths carry the name, and DPDK's vdev arguments cannot contain '='.)
func ringName(packed bool) string {
	if packed {
		return "packed"
	}
	return "split"
}
