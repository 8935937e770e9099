package main

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"strings"
)

// explainRun adds to an error of the running daemon what to do about it,
// where that is clear from the error: a socket path it may not write, or
// a privilege its NIC ports need (privileges.go).
func explainRun(cfg settings, err error) error {
	if !isDenied(err) {
		return err
	}
	if p := deniedPath(err); p != "" && !strings.HasPrefix(p, "/sys/fs/bpf") {
		return fmt.Errorf("%w: run as root, or give --ctl and --vhost paths in a directory this user may write", err)
	}
	return withPrivilegeHint(cfg, err)
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
