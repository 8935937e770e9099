package ctl

import (
	"errors"
	"io/fs"
	"net"
	"path/filepath"
	"syscall"
	"testing"
)

// TestCallSaysWhyItCannotReach: no socket and a socket nobody listens on
// both mean the daemon is not running; the error still wraps the dial's.
// (Permission denied needs another user: cmd/xvswitch tests it.)
func TestCallSaysWhyItCannotReach(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "ctl.sock")
	_, err := Call(missing, Request{Op: OpShowPorts})
	if err == nil || err.Error() != "is xvswitch running? no socket at "+missing || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing socket: %v", err)
	}
	stale := filepath.Join(t.TempDir(), "ctl.sock")
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: stale, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	l.SetUnlinkOnClose(false)
	l.Close()
	_, err = Call(stale, Request{Op: OpShowPorts})
	if err == nil || err.Error() != "is xvswitch running? nothing listens on "+stale || !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("stale socket: %v", err)
	}
}
