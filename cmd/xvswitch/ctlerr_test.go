package main

import (
	"errors"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
)

// unprivileged makes cmd run without root's powers: as nobody when the
// test runs as root, as the test's own user otherwise.
func unprivileged(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	if os.Geteuid() != 0 {
		return
	}
	u, err := user.Lookup("nobody")
	if err != nil {
		t.Skipf("no user nobody to run as: %v", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}}
}

// runUnprivileged runs the xvswitch binary as unprivileged does.
func runUnprivileged(t *testing.T, args ...string) (code int, stderr string) {
	t.Helper()
	cmd := exec.Command(buildXvswitch(t), args...)
	unprivileged(t, cmd)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, string(out)
	case errors.As(err, &ee):
		return ee.ExitCode(), string(out)
	case errors.Is(err, os.ErrPermission):
		t.Skipf("the unprivileged user cannot run %s: %v", cmd.Path, err)
	}
	t.Fatalf("xvswitch %v: %v", args, err)
	return 0, ""
}

// sharedDir is a directory anyone may read and search (t.TempDir's are
// root's own when root runs the test).
func sharedDir(t *testing.T) string {
	dir, err := os.MkdirTemp("", "xvswitch-test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestControlSocketErrors: the CLI tells a switch that is not running
// from a socket this user may not use, and says what to do. (ctl's tests
// have the socket nobody listens on.)
func TestControlSocketErrors(t *testing.T) {
	dir := sharedDir(t)
	missing := filepath.Join(dir, "missing.sock")
	code, out, errOut := runCLI("show", "ports", "--ctl", missing)
	if want := "xvswitch show: is xvswitch running? no socket at " + missing + "\n"; code != 1 || out != "" || errOut != want {
		t.Errorf("missing socket: exit %d, stderr %q, want exit 1, %q", code, errOut, want)
	}

	// A live socket this user may not write: root's, mode 0600, for
	// nobody; the user's own, mode 0, for anyone else.
	sock := filepath.Join(dir, "ctl.sock")
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	mode := os.FileMode(0o600)
	if os.Geteuid() != 0 {
		mode = 0
	}
	if err := os.Chmod(sock, mode); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(sock)
	if err != nil {
		t.Fatal(err)
	}
	group := strconv.Itoa(int(fi.Sys().(*syscall.Stat_t).Gid))
	if g, err := user.LookupGroupId(group); err == nil {
		group = g.Name
	} else {
		group = "gid " + group
	}
	code, errOut = runUnprivileged(t, "show", "stats", "--ctl", sock)
	if want := "xvswitch show: permission denied on " + sock + ": run as root or as a member of the socket's group (" + group + ")\n"; code != 1 || errOut != want {
		t.Errorf("socket without permission: exit %d, output %q, want exit 1, %q", code, errOut, want)
	}
}
