package netns

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"
)

// VethOptions shapes a veth pair.
type VethOptions struct {
	// Queues is the number of RX and TX queues of each end (default 1;
	// at most the CPU count on this kernel).
	Queues int
	// OuterAddr and InnerAddr are optional CIDR addresses ("10.0.0.1/24").
	OuterAddr, InnerAddr string
	// MTU, when non-zero, is set on both ends.
	MTU int
	// InnerMAC, when set, is the inner end's MAC (a far host that keeps
	// its address when its NIC is deleted and made again).
	InnerMAC string
	// KeepOffload leaves TX checksum offload on the inner end, as a
	// container's is: TCP and UDP it sends carry partial checksums, which
	// AF_XDP cannot tell from full ones (a NIC port on a veth completes
	// them: docs/afxdp-veth.md). By default it is turned off, so frames
	// the namespace sends carry full checksums byte for byte.
	KeepOffload bool
}

// Veth is a veth pair: Outer stays in the test's namespace (it plays the
// NIC the switch attaches to), Inner lives in NS (it plays the wire's far
// side: a host, a router, a traffic generator).
type Veth struct {
	Outer, Inner string
	NS           *Namespace
}

// NewVeth creates a namespace and a veth pair between it and the current
// namespace, both ends up, removed in t.Cleanup even if the test fails.
func NewVeth(t testing.TB, o VethOptions) *Veth {
	t.Helper()
	ns := New(t)
	base := UniqueName("xv")
	v := &Veth{Outer: base + "o", Inner: base + "i", NS: ns}
	if len(v.Outer) > 15 {
		v.Outer, v.Inner = base[:14]+"o", base[:14]+"i"
	}
	v.Create(t, o)
	return v
}

// Delete removes the pair (deleting one end deletes both): the NIC is
// unplugged, as a driver unbind or a deleted virtual device looks to
// whoever uses it. The namespace stays.
func (v *Veth) Delete(t testing.TB) {
	t.Helper()
	MustRun(t, "ip", "link", "del", v.Outer)
}

// Create makes the pair under v's names, the inner end in v.NS, as
// NewVeth does; after Delete it is the same NIC plugged back: the old
// names, new interface indexes.
func (v *Veth) Create(t testing.TB, o VethOptions) {
	t.Helper()
	args := []string{"link", "add", v.Outer}
	if o.Queues > 1 {
		args = append(args, "numrxqueues", fmt.Sprint(o.Queues), "numtxqueues", fmt.Sprint(o.Queues))
	}
	args = append(args, "type", "veth", "peer", "name", v.Inner, "netns", v.NS.Name)
	if o.Queues > 1 {
		args = append(args, "numrxqueues", fmt.Sprint(o.Queues), "numtxqueues", fmt.Sprint(o.Queues))
	}
	MustRun(t, "ip", args...)
	// The namespace's cleanup would delete the pair too, but the outer
	// end must not outlive a test whose namespace lingers.
	t.Cleanup(func() { _ = exec.Command("ip", "link", "del", v.Outer).Run() })
	ns := v.NS
	if o.MTU > 0 {
		MustRun(t, "ip", "link", "set", v.Outer, "mtu", fmt.Sprint(o.MTU))
		ns.MustRun(t, "ip", "link", "set", v.Inner, "mtu", fmt.Sprint(o.MTU))
	}
	if o.InnerMAC != "" {
		ns.MustRun(t, "ip", "link", "set", v.Inner, "address", o.InnerMAC)
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
}

// MAC returns the MAC address of an interface in the given namespace (nil:
// the current one).
func MAC(t testing.TB, ns *Namespace, ifname string) string {
	t.Helper()
	var out string
	if ns == nil {
		out = MustRun(t, "cat", "/sys/class/net/"+ifname+"/address")
	} else {
		out = ns.MustRun(t, "cat", "/sys/class/net/"+ifname+"/address")
	}
	return strings.TrimSpace(out)
}
