package xsk

import (
	"net"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"github.com/xvswitch/xvswitch/test/netns"
)

// xdpRedirect is a test-only XDP program and its XSKMAP: every frame goes
// to the socket in the slot of its rx queue, or to the kernel (XDP_PASS)
// when that slot is empty. It stands in for bpf/ (which tests here must not
// depend on) and needs no clang: it is assembled in Go.
type xdpRedirect struct {
	xsks *ebpf.Map
	prog *ebpf.Program
}

// xdp_md field offsets (struct xdp_md in linux/bpf.h).
const xdpMDRxQueueIndex = 16

func newXDPRedirect(t testing.TB, slots int) *xdpRedirect {
	t.Helper()
	m, err := ebpf.NewMap(&ebpf.MapSpec{Name: "xsks", Type: ebpf.XSKMap, KeySize: 4, ValueSize: 4, MaxEntries: uint32(slots)})
	if err != nil {
		t.Fatalf("XSKMAP: %v", err)
	}
	t.Cleanup(func() { m.Close() })
	const xdpPass = 2
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Name: "xsk_redirect",
		Type: ebpf.XDP,
		Instructions: asm.Instructions{
			// return bpf_redirect_map(&xsks, ctx->rx_queue_index, XDP_PASS);
			asm.LoadMem(asm.R2, asm.R1, xdpMDRxQueueIndex, asm.Word),
			asm.LoadMapPtr(asm.R1, m.FD()),
			asm.Mov.Imm(asm.R3, xdpPass),
			asm.FnRedirectMap.Call(),
			asm.Return(),
		},
		License: "GPL",
	})
	if err != nil {
		t.Fatalf("XDP program: %v", err)
	}
	t.Cleanup(func() { prog.Close() })
	return &xdpRedirect{xsks: m, prog: prog}
}

// attach attaches the program natively to ifname (in the current netns)
// until the test ends.
func (x *xdpRedirect) attach(t testing.TB, ifname string) {
	t.Helper()
	ifi, err := net.InterfaceByName(ifname)
	if err != nil {
		t.Fatal(err)
	}
	l, err := link.AttachXDP(link.XDPOptions{Program: x.prog, Interface: ifi.Index, Flags: link.XDPDriverMode})
	if err != nil {
		t.Fatalf("attach XDP to %s: %v", ifname, err)
	}
	t.Cleanup(func() { l.Close() })
}

// insert puts socket s in slot queue.
func (x *xdpRedirect) insert(t testing.TB, queue int, s *Socket) {
	t.Helper()
	if err := x.xsks.Update(uint32(queue), uint32(s.FD()), ebpf.UpdateAny); err != nil {
		t.Fatalf("XSKMAP[%d] = fd %d: %v", queue, s.FD(), err)
	}
}

// xdpDrop returns an XDP program that drops everything (for a benchmark's
// receiving end, so frames cost no skb).
func xdpDrop(t testing.TB) *ebpf.Program {
	t.Helper()
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Name:         "xsk_drop",
		Type:         ebpf.XDP,
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 1), asm.Return()}, // XDP_DROP
		License:      "GPL",
	})
	if err != nil {
		t.Fatalf("XDP drop program: %v", err)
	}
	t.Cleanup(func() { prog.Close() })
	return prog
}

// attachInNS attaches prog natively to the veth's inner end, inside its
// namespace, until the test ends.
func attachInNS(t testing.TB, v *netns.Veth, prog *ebpf.Program) {
	t.Helper()
	var l link.Link
	err := v.NS.Do(func() error {
		ifi, err := net.InterfaceByName(v.Inner)
		if err != nil {
			return err
		}
		l, err = link.AttachXDP(link.XDPOptions{Program: prog, Interface: ifi.Index, Flags: link.XDPDriverMode})
		return err
	})
	if err != nil {
		t.Fatalf("attach XDP to %s: %v", v.Inner, err)
	}
	t.Cleanup(func() { l.Close() })
}
