package main

import (
	"io"
	"os"
	"os/exec"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/xvswitch/xvswitch/ctl"
)

// Helpers of the VM tests (vms_qemu_test.go, vms_libvirt_test.go), whose
// setups docs/vms.md shows (vms_doc_test.go checks it does).

// waitPortsReady waits until every named port is ready (a front-end
// connected and its rings running).
func waitPortsReady(t *testing.T, d *runningDaemon, timeout time.Duration, names ...string) {
	t.Helper()
	var last []ctl.PortInfo
	for end := time.Now().Add(timeout); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		resp, err := ctl.Call(d.ctl, ctl.Request{Op: "show-ports"})
		if err != nil {
			t.Fatal(err)
		}
		last = resp.Ports
		ready := 0
		for _, p := range resp.Ports {
			for _, n := range names {
				if p.Name == n && p.State == "ready" {
					ready++
				}
			}
		}
		if ready == len(names) {
			return
		}
	}
	t.Fatalf("ports %v not all ready after %v: %+v", names, timeout, last)
}

func mkdir(t *testing.T, dir string, mode uint32, gid int) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, -1, gid); err != nil {
		t.Fatal(err)
	}
	// Chmod, not MkdirAll's mode: the umask must not narrow it. (unix's:
	// os.Chmod takes the set-group-ID bit as os.ModeSetgid, not 02000.)
	if err := unix.Chmod(dir, mode); err != nil {
		t.Fatal(err)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	src, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
}

func lsSockets(t *testing.T, socks ...string) string {
	t.Helper()
	out, err := exec.Command("ls", append([]string{"-l"}, socks...)...).CombinedOutput()
	if err != nil {
		t.Errorf("ls: %v", err)
	}
	return string(out)
}
