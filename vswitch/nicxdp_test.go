package vswitch

import (
	"net"
	"os/exec"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
)

// Someone takes the XDP hook from the port. `ip link set dev X xdp off`
// cannot: the program is attached through a BPF link, which netlink may
// not replace. `bpftool link detach` can; the port then finds its
// program gone at its next look (the kernel sends no netlink event for
// it) and attaches it again, with the same maps: sockets, MACs and host
// addresses are as they were.
func TestNICXDPDetached(t *testing.T) {
	l := newNICLab(t)
	b := l.b.Outer
	if out, err := exec.Command("ip", "link", "set", "dev", b, "xdp", "off").CombinedOutput(); err == nil {
		t.Fatalf("ip link set xdp off detached the program: %s", out)
	}
	if !l.ping(t, 0, 3*time.Second) {
		t.Fatal("A does not reach B after a refused xdp off")
	}
	ours := xdpProgID(t, b)
	fds := openFDs(t)
	for i := 1; i <= 2; i++ {
		lk := xdpLink(t, b)
		if err := lk.Detach(); err != nil {
			t.Fatal(err)
		}
		lk.Close()
		waitFor(t, "the port to attach its program again", func() bool { return xdpProgID(t, b) == ours })
		if !l.ping(t, 0, 3*time.Second) {
			t.Fatalf("A does not reach B after the program came back: %+v", l.stats(t, b))
		}
		checkPins(t, b)
		l.wantKernel(t, b, map[string]uint64{"xdp_detached_events": uint64(i), "xdp_reattached": uint64(i)})
		l.waitState(t, b, "up")
	}
	checkFDs(t, fds, "across re-attaching")
	balance(t, l.s)
	l.closeAndCheck(t)
}

// Someone detaches the port's program and attaches another. The port
// leaves it there: whoever did that wanted it, and taking the hook back
// would fight them (and flap). It says "degraded", logs why and counts
// it; once the other program goes, the port attaches its own again.
func TestNICXDPReplaced(t *testing.T) {
	l := newNICLab(t)
	b := l.b.Outer
	ours := xdpProgID(t, b)
	foreign, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.XDP, License: "GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 2 /* XDP_PASS */), asm.Return()}})
	if err != nil {
		t.Fatal(err)
	}
	defer foreign.Close()
	ifi, err := net.InterfaceByName(b)
	if err != nil {
		t.Fatal(err)
	}
	var theirs link.Link
	// The port may take the hook back between the detach and the other
	// attach: try again until the other program holds it.
	for try := 0; theirs == nil; try++ {
		lk := xdpLink(t, b)
		_ = lk.Detach()
		lk.Close()
		theirs, err = link.AttachXDP(link.XDPOptions{Program: foreign, Interface: ifi.Index, Flags: link.XDPDriverMode})
		if err != nil && try == 5 {
			t.Fatalf("attaching another program: %v", err)
		}
	}
	defer theirs.Close()
	l.waitState(t, b, "degraded")
	time.Sleep(3 * nicCheckInterval)
	if id := xdpProgID(t, b); id == ours {
		t.Fatal("the port took the hook back from the other program")
	}
	l.waitState(t, b, "degraded")
	l.wantKernel(t, b, map[string]uint64{"xdp_replaced_events": 1})

	theirs.Close()
	waitFor(t, "the port to attach its program again", func() bool { return xdpProgID(t, b) == ours })
	l.waitState(t, b, "up")
	if !l.ping(t, 0, 3*time.Second) {
		t.Fatalf("A does not reach B after the port took the hook back: %+v", l.stats(t, b))
	}
	checkPins(t, b)
	foreign.Close()
	l.closeAndCheck(t)
}
