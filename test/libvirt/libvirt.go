// Package libvirt runs the test guest (test/qemu's Boot) as a libvirt
// domain for integration tests: the system instance's QEMU, which runs as
// its own user (libvirt-qemu on Debian) with libvirt's dynamic ownership,
// and vhost-user NICs described the way a libvirt user writes them
// (Domain, Interface). Without systemd (these machines) no libvirtd runs:
// Connect then starts virtlogd and libvirtd itself and stops them when the
// test ends. No production package imports it.
//
// File by file: libvirt.go the connection (Connect, Virsh), daemon.go
// libvirtd and virtlogd run for a test, domain.go the domain XML, run.go
// domains created, waited for and destroyed.
package libvirt

import (
	"context"
	"errors"
	"net"
	"os/exec"
	"strings"
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
