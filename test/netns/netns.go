// Package netns gives integration tests network namespaces and veth pairs
// between them and the test's own namespace: the wire and the far side
// (a host, a router, a traffic generator) that a NIC-side test plays
// against. Everything it makes is removed when the test ends. No
// production package imports it.
package netns

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os/exec"
	"runtime"
	"strings"
	"testing"

	vnetns "github.com/vishvananda/netns"

	"github.com/xvswitch/xvswitch/test/require"
)

// Namespace is a named network namespace (as `ip netns add` makes it)
// that is deleted when the test ends.
type Namespace struct {
	Name string
}

// UniqueName returns prefix followed by random hex, at most 15 bytes long
// (the kernel's limit for interface names), so parallel tests never clash.
func UniqueName(prefix string) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	n := prefix + hex.EncodeToString(b[:])
	if len(n) > 15 {
		n = n[:15]
	}
	return n
}

// New creates a namespace with its loopback up, removed in t.Cleanup.
func New(t testing.TB) *Namespace {
	t.Helper()
	require.Root(t)
	require.Commands(t, "ip")
	ns := &Namespace{Name: UniqueName("xvs")}
	MustRun(t, "ip", "netns", "add", ns.Name)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns.Name).Run() })
	MustRun(t, "ip", "-n", ns.Name, "link", "set", "lo", "up")
	return ns
}

// Do runs fn inside the namespace on a locked OS thread. The thread is
// thrown away afterwards (its goroutine exits while still locked), so the
// namespace can never leak into other goroutines even if switching back
// would fail.
func (ns *Namespace) Do(fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		// No UnlockOSThread: the runtime terminates this thread on exit.
		h, err := vnetns.GetFromName(ns.Name)
		if err != nil {
			errc <- fmt.Errorf("open netns %s: %w", ns.Name, err)
			return
		}
		defer h.Close()
		if err := vnetns.Set(h); err != nil {
			errc <- fmt.Errorf("enter netns %s: %w", ns.Name, err)
			return
		}
		errc <- fn()
	}()
	return <-errc
}

// Exec returns a command that runs inside the namespace.
func (ns *Namespace) Exec(name string, args ...string) *exec.Cmd {
	return exec.Command("ip", append([]string{"netns", "exec", ns.Name, name}, args...)...)
}

// MustRun runs a command in the namespace and fails the test if it fails.
func (ns *Namespace) MustRun(t testing.TB, name string, args ...string) string {
	t.Helper()
	return MustRun(t, "ip", append([]string{"netns", "exec", ns.Name, name}, args...)...)
}

// MustRun runs a command and fails the test with its output if it fails.
func MustRun(t testing.TB, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}
