package bpf

import (
	"errors"
	"net"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"

	"github.com/xvswitch/xvswitch/test/require"
)

// xdpPassVerdict is XDP_PASS, what another program returns.
const xdpPassVerdict = 2

// Someone detaches the program (as `bpftool link detach` does; netlink
// is refused), Reattach puts the same program back: the maps and
// counters are those of before, the new link is pinned. With another
// program on the hook it gives ErrBusy and leaves that one alone.
func TestReattach(t *testing.T) {
	t.Parallel()
	require.Commands(t, "ping")
	l := newLab(t, Policy{Mode: ModeMAC})
	prog := l.S.ProgramID()
	if prog == 0 || attachedProg(t, l.Outer) != prog {
		t.Fatalf("ProgramID %d, the interface runs %d", prog, attachedProg(t, l.Outer))
	}
	if out, err := exec.Command("ip", "link", "set", "dev", l.Outer, "xdp", "off").CombinedOutput(); err == nil {
		t.Fatalf("netlink detached a program held by a BPF link: %s", out)
	}
	// Nothing to do while attached.
	before := progID(t, l.S)
	if err := l.S.Reattach(); err != nil || attachedProg(t, l.Outer) != prog {
		t.Fatalf("Reattach while attached: %v, prog %d", err, attachedProg(t, l.Outer))
	}
	vm, _ := net.ParseMAC("02:00:00:00:00:99")
	if err := l.S.AddMAC(vm, 7); err != nil {
		t.Fatal(err)
	}
	c0 := l.counters(t)
	l.ping(t, l.OuterIP, 1)
	l.waitDelta(t, c0, Counters{NotOwnedPassed: 1})

	detach(t, l.S.PinDir())
	if got := attachedProg(t, l.Outer); got != 0 {
		t.Fatalf("after detach the interface runs %d", got)
	}
	if err := l.S.Reattach(); err != nil {
		t.Fatal(err)
	}
	if got := attachedProg(t, l.Outer); got != prog || progID(t, l.S) != before {
		t.Fatalf("after Reattach the interface runs %d, want %d", got, prog)
	}
	lk, err := link.LoadPinnedLink(filepath.Join(l.S.PinDir(), pinLink), nil)
	if err != nil {
		t.Fatal(err)
	}
	info, err := lk.Info()
	lk.Close()
	if err != nil || info.XDP() == nil || int(info.XDP().Ifindex) != ifindex(t, l.Outer) {
		t.Fatalf("pinned link after Reattach: %+v %v", info, err)
	}
	if macs, err := l.S.MACs(); err != nil || macs[vm.String()] != 7 {
		t.Errorf("MAC map after Reattach: %v %v", macs, err)
	}
	// The same counters go on counting.
	l.ping(t, l.OuterIP, 1)
	l.waitDelta(t, c0, Counters{NotOwnedPassed: 2})

	// Another program takes the hook: not ours to remove.
	detach(t, l.S.PinDir())
	other := passProgram(t)
	theirs, err := link.AttachXDP(link.XDPOptions{Program: other, Interface: ifindex(t, l.Outer), Flags: link.XDPDriverMode})
	if err != nil {
		t.Fatal(err)
	}
	defer theirs.Close()
	if err := l.S.Reattach(); !errors.Is(err, ErrBusy) {
		t.Fatalf("Reattach over another program: %v, want ErrBusy", err)
	}
	oi, _ := other.Info()
	if id, _ := oi.ID(); attachedProg(t, l.Outer) != uint32(id) {
		t.Fatalf("the other program lost the hook: runs %d", attachedProg(t, l.Outer))
	}
	theirs.Close()
	// The port reattaches when netlink shows the hook empty (vswitch's
	// followXDP); wait for the same. Closing our fd need not be the last
	// reference to their link: a child a parallel test forks holds a copy
	// of every fd until it execs (CI once saw EBUSY here).
	waitHookEmpty(t, l.Outer)
	if err := l.S.Reattach(); err != nil || attachedProg(t, l.Outer) != prog {
		t.Fatalf("Reattach once the other program left: %v, runs %d", err, attachedProg(t, l.Outer))
	}
	if err := l.S.Close(); err != nil {
		t.Fatal(err)
	}
	if got := attachedProg(t, l.Outer); got != 0 {
		t.Errorf("Close left prog %d attached", got)
	}
}

// waitHookEmpty waits until the interface runs no XDP program. The
// deadline only bounds a test that would otherwise hang.
func waitHookEmpty(t *testing.T, ifname string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for attachedProg(t, ifname) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%s still runs prog %d", ifname, attachedProg(t, ifname))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// detach detaches the link pinned in dir, as `bpftool link detach` does.
func detach(t *testing.T, dir string) {
	t.Helper()
	lk, err := link.LoadPinnedLink(filepath.Join(dir, pinLink), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer lk.Close()
	if err := lk.Detach(); err != nil {
		t.Fatal(err)
	}
}

// passProgram is another XDP program: it passes everything.
func passProgram(t *testing.T) *ebpf.Program {
	t.Helper()
	p, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Name:         "other_pass",
		Type:         ebpf.XDP,
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, xdpPassVerdict), asm.Return()},
		License:      "GPL",
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}
