package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/xvswitch/xvswitch/bpf"
	"github.com/xvswitch/xvswitch/portspec"
	"github.com/xvswitch/xvswitch/xsk"
	"golang.org/x/sys/unix"
)

// unitSetting returns the space-separated values of key= in the example
// systemd unit (the last assignment wins, as in systemd).
func unitSetting(t *testing.T, key string) []string {
	t.Helper()
	f, err := os.Open("../../examples/xvswitch.service")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var vals []string
	found := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), key+"="); ok {
			vals, found = strings.Fields(v), true
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if !found {
		t.Fatalf("examples/xvswitch.service sets no %s=", key)
	}
	return vals
}

// documentedCapabilities returns the capabilities docs/privileges.md lists
// as granted: the first cell of each row of the table under its
// "## Granted" heading.
func documentedCapabilities(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("../../docs/privileges.md")
	if err != nil {
		t.Fatal(err)
	}
	var caps []string
	in := false
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "## ") {
			in = strings.HasPrefix(line, "## Granted")
			continue
		}
		if cell, ok := strings.CutPrefix(line, "| `CAP_"); in && ok {
			name, _, _ := strings.Cut(cell, "`")
			caps = append(caps, "CAP_"+name)
		}
	}
	return caps
}

// TestUnitCapabilities: the example unit grants exactly the capabilities
// the daemon's hint names and docs/privileges.md documents, as both its
// bounding and its ambient set, and raises the memlock limit instead of
// granting CAP_IPC_LOCK.
func TestUnitCapabilities(t *testing.T) {
	var code []string
	for _, c := range nicCapabilities {
		code = append(code, c.name)
	}
	want := strings.Join(code, " ")
	for what, got := range map[string][]string{
		"CapabilityBoundingSet=": unitSetting(t, "CapabilityBoundingSet"),
		"AmbientCapabilities=":   unitSetting(t, "AmbientCapabilities"),
		"docs/privileges.md":     documentedCapabilities(t),
	} {
		if strings.Join(got, " ") != want {
			t.Errorf("%s lists %v; nicCapabilities (cmd/xvswitch/privileges.go) are %v", what, got, code)
		}
	}
	if got := unitSetting(t, "LimitMEMLOCK"); len(got) != 1 || got[0] != "infinity" {
		t.Errorf("LimitMEMLOCK=%v, want infinity (the UMEM is locked memory)", got)
	}
}

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
