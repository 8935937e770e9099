// Package libvirt runs the test guest (test/qemu's Boot) as a libvirt
// domain for integration tests: the system instance's QEMU, which runs as
// its own user (libvirt-qemu on Debian) with libvirt's dynamic ownership,
// and vhost-user NICs described the way a libvirt user writes them
// (Domain, Interface). Without systemd (these machines) no libvirtd runs:
// Connect then starts virtlogd and libvirtd itself and stops them when the
// test ends. No production package imports it.
package libvirt

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/xvswitch/xvswitch/test/require"
)

// URI is the connection every virsh call here uses.
const URI = "qemu:///system"

// Paths of the system instance (Debian's libvirt 9.0).
const (
	virtlogdSocket = "/run/libvirt/virtlogd-sock"
	qemuLogDir     = "/var/log/libvirt/qemu"
)

// Conn is a usable qemu:///system: the host's libvirtd, or one Connect
// started for the test.
type Conn struct {
	t testing.TB
	// Started lists the daemons Connect started ("virtlogd", "libvirtd").
	Started []string
}

// Connect returns qemu:///system, starting virtlogd and libvirtd in the
// foreground if none runs (they are stopped when the test ends). Skips,
// or fails under XVS_REQUIRE_PRIV=1, without root or libvirt's programs.
func Connect(t testing.TB) *Conn {
	t.Helper()
	require.Root(t)
	require.Commands(t, "virsh", "libvirtd", "virtlogd", "qemu-system-x86_64")
	c := &Conn{t: t}
	if _, err := Virsh("uri"); err == nil {
		return c
	}
	if !listening(virtlogdSocket) {
		// libvirtd (system mode) logs each QEMU's output through virtlogd
		// and fails to start a domain without it.
		startDaemon(t, "virtlogd")
		waitFor(t, "virtlogd", 20*time.Second, func() bool { return listening(virtlogdSocket) })
		c.Started = append(c.Started, "virtlogd")
	}
	startDaemon(t, "libvirtd")
	// The first start probes QEMU's capabilities (seconds under load;
	// cached in /var/cache/libvirt/qemu afterwards).
	waitFor(t, "libvirtd", 60*time.Second, func() bool { _, err := Virsh("uri"); return err == nil })
	c.Started = append(c.Started, "libvirtd")
	return c
}

// Virsh runs virsh on URI and returns its output.
func Virsh(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "virsh", append([]string{"-c", URI}, args...)...).CombinedOutput()
	if err != nil {
		return string(out), errors.New("virsh " + strings.Join(args, " ") + ": " + err.Error() + ": " + strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

func listening(sock string) bool {
	c, err := net.DialTimeout("unix", sock, time.Second)
	if err == nil {
		c.Close()
	}
	return err == nil
}

func waitFor(t testing.TB, what string, d time.Duration, ok func() bool) {
	t.Helper()
	for end := time.Now().Add(d); !ok(); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("%s did not come up within %v", what, d)
		}
	}
}

// startDaemon runs a libvirt daemon in the foreground for the rest of the
// test, its output in the test log if the test fails. Pdeathsig kills it
// if the test binary dies; it fires when the forking thread exits, so the
// daemon is started and waited for on one locked thread.
func startDaemon(t testing.TB, name string) {
	t.Helper()
	var out bytes.Buffer
	cmd := exec.Command(name)
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	started, exited := make(chan error, 1), make(chan struct{})
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		err := cmd.Start()
		started <- err
		if err == nil {
			_ = cmd.Wait()
		}
		close(exited)
	}()
	if err := <-started; err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("%s output:\n%s", name, out.String())
		}
	})
}

// Define defines the domain in file (named name) with schema validation,
// and undefines it again when the test ends; it returns virsh's output.
func (c *Conn) Define(t testing.TB, file, name string) (string, error) {
	t.Helper()
	out, err := Virsh("define", "--validate", file)
	if err == nil {
		t.Cleanup(func() { _, _ = Virsh("undefine", name) })
	}
	return strings.TrimSpace(out), err
}

// Running is a transient domain started by Create.
type Running struct {
	Name  string
	start time.Time
}

// Create starts d as a transient domain (`virsh create`: it is gone once
// the guest powers off) and destroys it when the test ends if it still
// runs. libvirt's QEMU waits, before the guest starts, until a back-end
// connects to each interface of mode "server": start xvswitch first.
func (c *Conn) Create(t testing.TB, d *Domain, dir string) *Running {
	t.Helper()
	if d.Name == "" {
		var b [4]byte
		_, _ = rand.Read(b[:])
		d.Name = "xvs-" + hex.EncodeToString(b[:])
	}
	file := filepath.Join(dir, d.Name+".xml")
	if err := os.WriteFile(file, []byte(d.XML()), 0o644); err != nil {
		t.Fatal(err)
	}
	r := &Running{Name: d.Name, start: time.Now()}
	t.Cleanup(func() {
		if r.running() {
			_, _ = Virsh("destroy", r.Name)
		}
		log := filepath.Join(qemuLogDir, r.Name+".log")
		if t.Failed() {
			b, _ := os.ReadFile(log)
			t.Logf("libvirt's QEMU log of %s:\n%s", r.Name, b)
		}
		os.Remove(log)
	})
	if out, err := Virsh("create", file); err != nil {
		t.Fatalf("%v\n%s", err, d.XML())
	} else {
		t.Logf("%s", strings.TrimSpace(out))
	}
	return r
}

func (r *Running) running() bool {
	_, err := Virsh("domid", r.Name)
	return err == nil
}

// Wait waits until the domain is gone (the guest powered off) or timeout
// passes, and returns how long it ran and whether it ended by itself.
func (r *Running) Wait(timeout time.Duration) (time.Duration, bool) {
	for end := time.Now().Add(timeout); r.running(); time.Sleep(250 * time.Millisecond) {
		if time.Now().After(end) {
			return time.Since(r.start), false
		}
	}
	return time.Since(r.start), true
}
