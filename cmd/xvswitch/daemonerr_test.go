package main

import (
	"bytes"
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestDaemonFatalError: a daemon that cannot start logs why, then
// "xvswitch stopped", last, and exits 1.
func TestDaemonFatalError(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(buildXvswitch(t), "run", "--ctl", filepath.Join(dir, "ctl.sock"), "--log-format", "json",
		"--vhost", filepath.Join(dir, "no-such-dir", "vm1.sock"))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("exit: %v, want 1\n%s", err, stderr.String())
	}
	lines := jsonLog(t, stderr.Bytes())
	n := len(lines)
	if n < 2 || lines[n-2].str("msg") != "xvswitch failed" || lines[n-2].str("level") != "ERROR" ||
		!strings.Contains(lines[n-2].str("err"), "no-such-dir/vm1.sock") || lines[n-1].str("msg") != "xvswitch stopped" {
		t.Fatalf("want the error, then xvswitch stopped, last:\n%s", stderr.String())
	}
}

// TestDaemonPermissionHints: run without root's powers, the daemon says
// what it needs: a directory it may write for its sockets, or, for a NIC,
// root or the capabilities, naming those it lacks.
func TestDaemonPermissionHints(t *testing.T) {
	shared := sharedDir(t)
	ctlSock := filepath.Join(shared, "ctl.sock")
	locked := filepath.Join(shared, "locked")
	// Root's 0755 directory is read-only to nobody; a user's own 0555
	// one is read-only to the user.
	if err := os.Mkdir(locked, 0o555); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		if err := os.Chmod(shared, 0o777); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--vhost", filepath.Join(locked, "vm1.sock")},
			"permission denied: run as root, or give --ctl and --vhost paths in a directory this user may write"},
		{[]string{"--nic", "lo"},
			"xvswitch lacks CAP_NET_ADMIN, CAP_NET_RAW, CAP_BPF, CAP_PERFMON, which NIC ports need: see docs/privileges.md"},
	} {
		code, out := runUnprivileged(t, append([]string{"run", "--ctl", ctlSock}, tc.args...)...)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		n := len(lines)
		if code != 1 || n < 2 || !strings.Contains(lines[n-2], `msg="xvswitch failed"`) || !strings.Contains(lines[n-2], tc.want) ||
			!strings.Contains(lines[n-1], `msg="xvswitch stopped"`) {
			t.Errorf("run %v: exit %d, want 1 and %q, then xvswitch stopped:\n%s", tc.args, code, tc.want, out)
		}
	}
}

// TestMetricsAddressBusy: a --metrics address another program holds is
// fatal at start: one line says so, the daemon never says it is
// running, sets nothing up and exits 1.
func TestMetricsAddressBusy(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	addr := busy.Addr().String()
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	vm := filepath.Join(dir, "vm1.sock")
	cmd := exec.CommandContext(ctx, buildXvswitch(t), "run", "--ctl", filepath.Join(dir, "ctl.sock"), "--metrics", addr, "--vhost", vm)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err = cmd.Run()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("exit: %v, want 1\n%s", err, stderr.String())
	}
	var saying []string
	for _, line := range strings.Split(stderr.String(), "\n") {
		if strings.Contains(line, addr) {
			saying = append(saying, line)
		}
	}
	want := "--metrics " + addr + ": cannot serve metrics there: address already in use"
	if len(saying) != 1 || !strings.Contains(saying[0], "level=ERROR") || !strings.Contains(saying[0], want) {
		t.Errorf("want one error line saying %q, got:\n%s", want, stderr.String())
	}
	if strings.Contains(stderr.String(), "xvswitch running") {
		t.Errorf("the daemon said it was running:\n%s", stderr.String())
	}
	if _, err := os.Stat(vm); err == nil {
		t.Errorf("the daemon set up %s before failing", vm)
	}
}
