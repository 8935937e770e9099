package main

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// What xvswitch run needs for NIC ports: XDP attach and netlink
// (NET_ADMIN), AF_XDP sockets (NET_RAW), loading and pinning the program
// (BPF), and the UMEM's locked memory (IPC_LOCK).
var runCaps = []struct {
	bit  int
	name string
}{
	{unix.CAP_NET_ADMIN, "CAP_NET_ADMIN"},
	{unix.CAP_NET_RAW, "CAP_NET_RAW"},
	{unix.CAP_BPF, "CAP_BPF"},
	{unix.CAP_IPC_LOCK, "CAP_IPC_LOCK"},
}

// explainRun adds to an error of the running daemon what to do about it,
// where that is clear from the error.
func explainRun(err error) error {
	if !isPermission(err) {
		return err
	}
	if p := deniedPath(err); p != "" && !strings.HasPrefix(p, "/sys/fs/bpf") {
		return fmt.Errorf("%w: run as root, or give --ctl and --vhost paths in a directory this user may write", err)
	}
	if missing := missingCaps(); len(missing) > 0 {
		return fmt.Errorf("%w: xvswitch run needs root, or CAP_NET_ADMIN, CAP_NET_RAW, CAP_BPF and CAP_IPC_LOCK; it runs without %s", err, strings.Join(missing, ", "))
	}
	return err
}

// isPermission reports whether err is EACCES or EPERM. bpf/ wraps its
// own error and keeps the system's as text ("%w: create DIR: %v"), so
// the text counts too.
func isPermission(err error) bool {
	if errors.Is(err, fs.ErrPermission) {
		return true
	}
	s := err.Error()
	return strings.Contains(s, syscall.EACCES.Error()) || strings.Contains(s, syscall.EPERM.Error())
}

// deniedPath is the file an error is about, if it says.
func deniedPath(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Path
	}
	var oe *net.OpError
	if errors.As(err, &oe) {
		for _, a := range []net.Addr{oe.Addr, oe.Source} {
			if ua, ok := a.(*net.UnixAddr); ok && ua != nil {
				return ua.Name
			}
		}
	}
	return ""
}

// missingCaps names the capabilities of runCaps this process does not
// have in its effective set.
func missingCaps() []string {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return nil
	}
	var eff uint64
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "CapEff:"); ok {
			eff, _ = strconv.ParseUint(strings.TrimSpace(v), 16, 64)
		}
	}
	var missing []string
	for _, c := range runCaps {
		if eff&(1<<c.bit) == 0 {
			missing = append(missing, c.name)
		}
	}
	return missing
}
