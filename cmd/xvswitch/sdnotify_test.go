package main

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// notifySocket listens on a unix datagram socket at name, sets
// NOTIFY_SOCKET to it, and returns it.
func notifySocket(t *testing.T, name string) *net.UnixConn {
	t.Helper()
	c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: name, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	t.Setenv("NOTIFY_SOCKET", name)
	return c
}

func readNotify(t *testing.T, c *net.UnixConn) string {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	b := make([]byte, 256)
	n, err := c.Read(b)
	if err != nil {
		t.Fatal(err)
	}
	return string(b[:n])
}

// TestSdNotify: a state is one datagram on the socket $NOTIFY_SOCKET
// names, a path or an abstract @name; without it nothing is sent.
func TestSdNotify(t *testing.T) {
	for name, addr := range map[string]string{
		"path":     filepath.Join(t.TempDir(), "notify"),
		"abstract": fmt.Sprintf("@xvswitch-test-notify-%d", os.Getpid()),
	} {
		t.Run(name, func(t *testing.T) {
			c := notifySocket(t, addr)
			for _, state := range []string{"READY=1", "STOPPING=1"} {
				if err := sdNotify(state); err != nil {
					t.Fatal(err)
				}
				if got := readNotify(t, c); got != state {
					t.Fatalf("got %q, want %q", got, state)
				}
			}
		})
	}
	t.Run("unset", func(t *testing.T) {
		t.Setenv("NOTIFY_SOCKET", "")
		if err := sdNotify("READY=1"); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("bad", func(t *testing.T) {
		t.Setenv("NOTIFY_SOCKET", "relative/notify")
		if err := sdNotify("READY=1"); err == nil {
			t.Fatal("a relative NOTIFY_SOCKET was accepted")
		}
		t.Setenv("NOTIFY_SOCKET", filepath.Join(t.TempDir(), "nobody-listens"))
		if err := sdNotify("READY=1"); err == nil {
			t.Fatal("no error without a listener")
		}
	})
}

// TestDaemonNotifies: the daemon sends READY=1 once its control socket
// listens, with the --ctl-mode and --ctl-group it was given, and
// STOPPING=1 on SIGTERM.
func TestDaemonNotifies(t *testing.T) {
	c := notifySocket(t, filepath.Join(t.TempDir(), "notify"))
	sock := filepath.Join(t.TempDir(), "ctl.sock")
	gid := os.Getgid()
	if gid == 0 {
		gid = 4242
	}
	cmd := exec.Command(buildXvswitch(t), "run", "--ctl", sock, "--ctl-mode", "0600", "--ctl-group", strconv.Itoa(gid),
		"--vhost", filepath.Join(t.TempDir(), "vm1.sock"))
	d := launchDaemon(t, sock, cmd)
	if got := readNotify(t, c); got != "READY=1" {
		t.Fatalf("first notification %q, want READY=1", got)
	}
	fi, err := os.Stat(sock)
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); fi.Mode().Perm() != 0o600 || int(st.Gid) != gid {
		t.Errorf("control socket mode %v group %d, want 0600 and %d", fi.Mode().Perm(), st.Gid, gid)
	}
	if err := d.stop(t); err != nil {
		t.Fatalf("xvswitch exited: %v", err)
	}
	if got := readNotify(t, c); got != "STOPPING=1" {
		t.Fatalf("on SIGTERM %q, want STOPPING=1", got)
	}
}

// TestCtlPermissionFlags: --ctl-mode and --ctl-group, on the command line
// or in the config file, set the control socket's mode and group; a group
// is a name or a GID.
func TestCtlPermissionFlags(t *testing.T) {
	file := filepath.Join(t.TempDir(), "xvs.conf")
	if err := os.WriteFile(file, []byte("ctl-mode 0640\nctl-group root\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := parseRun([]string{"--config", file})
	if err != nil || cfg.CtlMode != 0o640 || cfg.CtlGID != 0 {
		t.Fatalf("from the file: mode %v gid %d, %v", cfg.CtlMode, cfg.CtlGID, err)
	}
	cfg, err = parseRun([]string{"--config", file, "--ctl-group", "4242", "--ctl-mode", "0600"})
	if err != nil || cfg.CtlMode != 0o600 || cfg.CtlGID != 4242 {
		t.Fatalf("flags over the file: mode %v gid %d, %v", cfg.CtlMode, cfg.CtlGID, err)
	}
	for _, bad := range [][]string{{"--ctl-mode", "0999"}, {"--ctl-mode", "0"}, {"--ctl-mode", "1777"}, {"--ctl-group", "no-such-group-here"}} {
		if _, err := parseRun(bad); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}

// TestUnitNotify: the example unit waits for the daemon's READY=1 and is
// ordered before libvirt, whose guests need the vhost-user sockets.
func TestUnitNotify(t *testing.T) {
	if got := unitSetting(t, "Type"); len(got) != 1 || got[0] != "notify" {
		t.Errorf("Type=%v, want notify (the daemon sends READY=1)", got)
	}
	before := map[string]bool{}
	for _, u := range unitSetting(t, "Before") {
		before[u] = true
	}
	for _, u := range []string{"libvirtd.service", "virtqemud.service"} {
		if !before[u] {
			t.Errorf("Before= lacks %s", u)
		}
	}
}
