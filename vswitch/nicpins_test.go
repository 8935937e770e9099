package vswitch

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"

	"github.com/xvswitch/xvswitch/bpf"
)

// What the NIC tests check of an interface's XDP side: its pins, and the
// program it runs.

// pinNames are the entries of an attached interface's pin directory.
var pinNames = []string{"config", "counters", "host_v4", "host_v6", "link", "macs", "queue_owners", "xsks", "xvs_steer"}

// checkPins checks ifname's pin directory is complete and its pins are
// the program attached to the interface now: the link pinned is attached
// to the interface's current index, the program pinned is the one the
// interface runs.
func checkPins(t *testing.T, ifname string) {
	t.Helper()
	dir := filepath.Join(bpf.PinRoot, ifname)
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("pins of %s: %v", ifname, err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if !slices.Equal(names, pinNames) {
		t.Fatalf("pins of %s: %v, want %v", ifname, names, pinNames)
	}
	nl, err := netlink.LinkByName(ifname)
	if err != nil {
		t.Fatal(err)
	}
	var running uint32
	if x := nl.Attrs().Xdp; x != nil {
		running = x.ProgId
	}
	lk, err := link.LoadPinnedLink(filepath.Join(dir, "link"), nil)
	prog, perr := ebpf.LoadPinnedProgram(filepath.Join(dir, "xvs_steer"), nil)
	if err != nil || perr != nil {
		t.Fatalf("pins of %s: link %v, program %v", ifname, err, perr)
	}
	defer lk.Close()
	defer prog.Close()
	li, err := lk.Info()
	pi, perr := prog.Info()
	if err != nil || perr != nil {
		t.Fatalf("pins of %s: link info %v, program info %v", ifname, err, perr)
	}
	if x := li.XDP(); x == nil || int(x.Ifindex) != nl.Attrs().Index || uint32(li.Program) != running {
		t.Errorf("pinned link of %s: %+v running %d, want attached to ifindex %d with the program it runs, %d",
			ifname, x, li.Program, nl.Attrs().Index, running)
	}
	if id, _ := pi.ID(); uint32(id) != running {
		t.Errorf("%s runs XDP program %d, the pinned program is %d", ifname, running, id)
	}
}

// noPins checks ifname has no pin directory.
func noPins(t *testing.T, ifname string) {
	t.Helper()
	if _, err := os.Stat(filepath.Join(bpf.PinRoot, ifname)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("pin directory of %s: %v, want none", ifname, err)
	}
}

// xdpLink is the XDP link pinned for ifname, for a test to detach as
// `bpftool link detach` would.
func xdpLink(t *testing.T, ifname string) link.Link {
	t.Helper()
	lk, err := link.LoadPinnedLink(filepath.Join(bpf.PinRoot, ifname, "link"), nil)
	if err != nil {
		t.Fatal(err)
	}
	return lk
}

// xdpProgID is the id of the XDP program ifname runs (0: none).
func xdpProgID(t *testing.T, ifname string) uint32 {
	t.Helper()
	nl, err := netlink.LinkByName(ifname)
	if err != nil {
		t.Fatal(err)
	}
	if x := nl.Attrs().Xdp; x != nil {
		return x.ProgId
	}
	return 0
}
