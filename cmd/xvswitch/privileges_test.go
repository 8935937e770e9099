package main

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/xvswitch/xvswitch/bpf"
	"github.com/xvswitch/xvswitch/portspec"
	"github.com/xvswitch/xvswitch/xsk"
	"golang.org/x/sys/unix"
)

// TestPrivilegeHint: a refusal on a NIC port names the capabilities the
// process lacks or the pin directory it cannot write; other failures,
// and the memlock one (xsk explains it), get no hint.
func TestPrivilegeHint(t *testing.T) {
	nic := settings{}
	nic.NICs = []portspec.NIC{{Name: "eth1", Ifname: "eth1"}}
	all := uint64(0)
	for _, c := range nicCapabilities {
		all |= 1 << c.bit
	}
	eperm := fmt.Errorf("xsk: socket(AF_XDP): %w", unix.EPERM)
	for _, c := range []struct {
		name string
		cfg  settings
		err  error
		caps uint64
		want string // "" for no hint
	}{
		{"missing", nic, eperm, all &^ (1<<unix.CAP_NET_RAW | 1<<unix.CAP_PERFMON), "lacks CAP_NET_RAW, CAP_PERFMON, which NIC ports need"},
		{"flattened errno", nic, fmt.Errorf("%w: load program: permission denied: ...", bpf.ErrLoad), 0, "lacks CAP_NET_ADMIN, CAP_NET_RAW, CAP_BPF, CAP_PERFMON"},
		{"all there", nic, eperm, all, ""},
		{"not a refusal", nic, fmt.Errorf("%w: eth1: no such device", bpf.ErrInterface), 0, ""},
		{"no NIC", settings{}, eperm, 0, ""},
		{"memlock", nic, &xsk.MemlockError{Errno: unix.EPERM}, 0, ""},
		{"pin dir", nic, fmt.Errorf("%w: create %s/eth1: %w", bpf.ErrPin, bpf.PinRoot, unix.EACCES), all, "must belong to the user xvswitch runs as"},
		{"no bpffs", nic, fmt.Errorf("%w: mount bpffs at %s: %v", bpf.ErrPin, bpf.BPFFS, unix.EPERM), all, "mounting it needs CAP_SYS_ADMIN"},
	} {
		got := privilegeHint(c.cfg, c.err, c.caps)
		if c.want == "" && got != "" || !strings.Contains(got, c.want) {
			t.Errorf("%s: hint %q, want %q", c.name, got, c.want)
		}
	}
	// The hint is added to the error, which still wraps the cause.
	caps, err := effectiveCaps()
	if err != nil {
		t.Fatal(err)
	}
	if caps&(1<<unix.CAP_NET_RAW) == 0 {
		if err := withPrivilegeHint(nic, eperm); !errors.Is(err, unix.EPERM) || !strings.Contains(err.Error(), "docs/privileges.md") {
			t.Errorf("withPrivilegeHint: %v", err)
		}
	}
}
