package test

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os/exec"
	"runtime"
	"strings"
	"testing"

	"github.com/vishvananda/netns"

	"github.com/xvswitch/xvswitch/test/require"
)

// NetNS is a named network namespace (as `ip netns add` makes it) that is
// deleted when the test ends.
type NetNS struct {
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

// NewNetNS creates a namespace with its loopback up, removed in t.Cleanup.
func NewNetNS(t testing.TB) *NetNS {
	t.Helper()
	require.Root(t)
	require.Commands(t, "ip")
	ns := &NetNS{Name: UniqueName("xvs")}
	MustRun(t, "ip", "netns", "add", ns.Name)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns.Name).Run() })
	MustRun(t, "ip", "-n", ns.Name, "link", "set", "lo", "up")
	return ns
}

// Do runs fn inside the namespace on a locked OS thread. The thread is
// thrown away afterwards (its goroutine exits while still locked), so the
// namespace can never leak into other goroutines even if switching back
// would fail.
func (ns *NetNS) Do(fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		// No UnlockOSThread: the runtime terminates this thread on exit.
		h, err := netns.GetFromName(ns.Name)
		if err != nil {
			errc <- fmt.Errorf("open netns %s: %w", ns.Name, err)
			return
		}
		defer h.Close()
		if err := netns.Set(h); err != nil {
			errc <- fmt.Errorf("enter netns %s: %w", ns.Name, err)
			return
		}
		errc <- fn()
	}()
	return <-errc
}

// Exec returns a command that runs inside the namespace.
func (ns *NetNS) Exec(name string, args ...string) *exec.Cmd {
	return exec.Command("ip", append([]string{"netns", "exec", ns.Name, name}, args...)...)
}

// MustRun runs a command in the namespace and fails the test if it fails.
func (ns *NetNS) MustRun(t testing.TB, name string, args ...string) string {
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

// VethOptions shapes a veth pair.
type VethOptions struct {
	// Queues is the number of RX and TX queues of each end (default 1;
	// at most the CPU count on this kernel).
	Queues int
	// OuterAddr and InnerAddr are optional CIDR addresses ("10.0.0.1/24").
	OuterAddr, InnerAddr string
	// MTU, when non-zero, is set on both ends.
	MTU int
	// KeepOffload leaves TX checksum offload on the inner end. By default
	// it is turned off, so frames the namespace sends carry full checksums
	// (AF_XDP has no notion of partial checksums).
	KeepOffload bool
}

// Veth is a veth pair: Outer stays in the test's namespace (it plays the
// NIC the switch attaches to), Inner lives in NS (it plays the wire's far
// side: a host, a router, a traffic generator).
type Veth struct {
	Outer, Inner string
	NS           *NetNS
}

// NewVeth creates a namespace and a veth pair between it and the current
// namespace, both ends up, removed in t.Cleanup even if the test fails.
func NewVeth(t testing.TB, o VethOptions) *Veth {
	t.Helper()
	ns := NewNetNS(t)
	base := UniqueName("xv")
	v := &Veth{Outer: base + "o", Inner: base + "i", NS: ns}
	if len(v.Outer) > 15 {
		v.Outer, v.Inner = base[:14]+"o", base[:14]+"i"
	}
	args := []string{"link", "add", v.Outer}
	if o.Queues > 1 {
		args = append(args, "numrxqueues", fmt.Sprint(o.Queues), "numtxqueues", fmt.Sprint(o.Queues))
	}
	args = append(args, "type", "veth", "peer", "name", v.Inner, "netns", ns.Name)
	if o.Queues > 1 {
		args = append(args, "numrxqueues", fmt.Sprint(o.Queues), "numtxqueues", fmt.Sprint(o.Queues))
	}
	MustRun(t, "ip", args...)
	// Deleting one end deletes both; the namespace's cleanup would too,
	// but the outer end must not outlive a test whose namespace lingers.
	t.Cleanup(func() { _ = exec.Command("ip", "link", "del", v.Outer).Run() })
	if o.MTU > 0 {
		MustRun(t, "ip", "link", "set", v.Outer, "mtu", fmt.Sprint(o.MTU))
		ns.MustRun(t, "ip", "link", "set", v.Inner, "mtu", fmt.Sprint(o.MTU))
	}
	if o.OuterAddr != "" {
		MustRun(t, "ip", "addr", "add", o.OuterAddr, "dev", v.Outer)
	}
	if o.InnerAddr != "" {
		ns.MustRun(t, "ip", "addr", "add", o.InnerAddr, "dev", v.Inner)
	}
	MustRun(t, "ip", "link", "set", v.Outer, "up")
	ns.MustRun(t, "ip", "link", "set", v.Inner, "up")
	if !o.KeepOffload {
		if _, err := exec.LookPath("ethtool"); err == nil {
			_ = ns.Exec("ethtool", "-K", v.Inner, "tx", "off").Run()
		}
	}
	return v
}

// MAC returns the MAC address of an interface in the given namespace (nil:
// the current one).
func MAC(t testing.TB, ns *NetNS, ifname string) string {
	t.Helper()
	var out string
	if ns == nil {
		out = MustRun(t, "cat", "/sys/class/net/"+ifname+"/address")
	} else {
		out = ns.MustRun(t, "cat", "/sys/class/net/"+ifname+"/address")
	}
	return strings.TrimSpace(out)
}
