package ctl

import (
	"errors"
	"net"
	"path/filepath"
	"syscall"
	"testing"
)

// TestCallSaysWhyItCannotReach: no socket and a socket nobody listens on
// (a killed daemon's) both mean the daemon is not running; the error
// still wraps the dial's. (Permission denied needs another user:
// cmd/xvswitch tests it.)
func TestCallSaysWhyItCannotReach(t *testing.T) {
	stale := staleSocket(t)
	for _, tc := range []struct {
		path, want string
		errno      syscall.Errno
	}{
		{filepath.Join(t.TempDir(), "missing.sock"), "is xvswitch running? no socket at ", syscall.ENOENT},
		{stale, "is xvswitch running? nothing listens on ", syscall.ECONNREFUSED},
	} {
		_, err := Call(tc.path, Request{Op: OpShowPorts})
		if err == nil || err.Error() != tc.want+tc.path || !errors.Is(err, tc.errno) {
			t.Errorf("%s: %v, want %s%s wrapping %v", tc.path, err, tc.want, tc.path, tc.errno)
		}
	}
}

// staleSocket is the socket file of a listener that is gone.
func staleSocket(t *testing.T) string {
	path := filepath.Join(t.TempDir(), "stale.sock")
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	l.SetUnlinkOnClose(false)
	l.Close()
	return path
}
