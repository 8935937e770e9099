package main

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/xvswitch/xvswitch/bpf"
	"github.com/xvswitch/xvswitch/xsk"
	"golang.org/x/sys/unix"
)

// What xvswitch needs of the kernel's privileges, and what a start that
// failed for want of one is told. docs/privileges.md has the measurements
// behind the list and what fails without each; examples/xvswitch.service
// grants exactly it (TestUnitCapabilities checks all three agree).

// capability is one Linux capability by bit number and name.
type capability struct {
	bit  uint
	name string
}

// nicCapabilities are what a NIC port needs (XDP, BPF maps, AF_XDP). The
// UMEM's locked memory is the rlimit's business (or CAP_IPC_LOCK's) and xsk
// explains it itself; vhost ports, the control socket, the metrics endpoint
// and worker pinning need no capability.
var nicCapabilities = []capability{
	{unix.CAP_NET_ADMIN, "CAP_NET_ADMIN"},
	{unix.CAP_NET_RAW, "CAP_NET_RAW"},
	{unix.CAP_BPF, "CAP_BPF"},
	{unix.CAP_PERFMON, "CAP_PERFMON"},
}

// effectiveCaps reads the process's effective capability set.
func effectiveCaps() (uint64, error) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "CapEff:"); ok {
			return strconv.ParseUint(strings.TrimSpace(v), 16, 64)
		}
	}
	return 0, errors.New("no CapEff in /proc/self/status")
}

// withPrivilegeHint adds to err, why `xvswitch run` could not start, what
// to grant when a privilege the process lacks is the likely cause.
func withPrivilegeHint(cfg settings, err error) error {
	caps, cerr := effectiveCaps()
	if cerr != nil {
		return err
	}
	if h := privilegeHint(cfg, err, caps); h != "" {
		return fmt.Errorf("%w (%s: see docs/privileges.md)", err, h)
	}
	return err
}

// privilegeHint says what to grant when err is a refusal by the kernel and
// the process, with effective capabilities caps, lacks something its NIC
// ports need; "" otherwise.
func privilegeHint(cfg settings, err error, caps uint64) string {
	if len(cfg.NICs) == 0 || errors.Is(err, xsk.ErrMemlock) || !isDenied(err) {
		return ""
	}
	var missing []string
	for _, c := range nicCapabilities {
		if caps&(1<<c.bit) == 0 {
			missing = append(missing, c.name)
		}
	}
	// Without the capabilities nothing else can work, so they come first.
	if len(missing) > 0 {
		return "xvswitch lacks " + strings.Join(missing, ", ") + ", which NIC ports need"
	}
	if errors.Is(err, bpf.ErrPin) {
		if strings.Contains(err.Error(), "mount bpffs") {
			return "bpffs is not mounted at " + bpf.BPFFS + " and mounting it needs CAP_SYS_ADMIN: mount it first (systemd does at boot)"
		}
		return fmt.Sprintf("uid %d cannot pin: %s and everything in it must belong to the user xvswitch runs as (the example unit's ExecStartPre= makes it so)",
			os.Geteuid(), bpf.PinRoot)
	}
	return ""
}

// isDenied tells a refusal (EPERM, EACCES) from other failures. The loader
// flattens the kernel's error into its message, so the text counts too.
func isDenied(err error) bool {
	if errors.Is(err, os.ErrPermission) {
		return true
	}
	msg := err.Error()
	return strings.Contains(msg, unix.EPERM.Error()) || strings.Contains(msg, unix.EACCES.Error())
}
