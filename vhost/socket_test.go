package vhost_test

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/xvswitch/xvswitch/vhost"
	"github.com/xvswitch/xvswitch/vhost/vhosttest"
)

func TestServerSocket(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "vm.sock")

	// A stale socket file (its listener gone without unlinking) is replaced.
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	_ = ln.Close()
	if _, err := os.Lstat(path); err != nil {
		t.Fatal("stale socket file should still exist:", err)
	}
	gid := 0
	if os.Geteuid() == 0 {
		gid = 4242
	}
	d, evs, mu := newDevice(t, vhost.Config{Path: path, SocketMode: 0o600, SocketGID: gid})
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket file mode %v", fi.Mode())
	}
	if gid != 0 {
		if st := fi.Sys().(*syscall.Stat_t); int(st.Gid) != gid {
			t.Fatalf("socket group %d, want %d", st.Gid, gid)
		}
	}

	// A second device on a path with a live listener is refused, and the
	// live socket is left alone.
	if _, err := vhost.Open(vhost.Config{Path: path}); !errors.Is(err, vhost.ErrSocketInUse) {
		t.Fatalf("second listener on a live socket: %v", err)
	}
	// A path that is not a socket is not ours to remove.
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := vhost.Open(vhost.Config{Path: file}); !errors.Is(err, vhost.ErrNotSocket) {
		t.Fatalf("listening over a regular file: %v", err)
	}

	f := vhosttest.Dial(t, path)
	if got := f.CallU64(vhosttest.ReqGetFeatures); got != d.Info().Offered {
		t.Fatalf("features %#x", got)
	}
	vhosttest.WaitFor(t, "connected", func() bool { return d.Info().Connected })

	// One front-end at a time: a second connection is closed at once.
	g := vhosttest.Dial(t, path)
	_ = g.SendMsg(vhosttest.ReqGetFeatures, vhosttest.FlagVersion, nil)
	if _, err := g.Reply(); err == nil {
		t.Fatal("second connection was served")
	}
	if got := f.CallU64(vhosttest.ReqGetFeatures); got != d.Info().Offered {
		t.Fatal("first connection lost")
	}

	// The front-end goes away; the next one is served.
	_ = f.Close()
	vhosttest.WaitFor(t, "disconnected", func() bool { return !d.Info().Connected })
	h := vhosttest.Dial(t, path)
	if got := h.CallU64(vhosttest.ReqGetFeatures); got != d.Info().Offered {
		t.Fatal("reconnection not served")
	}
	if !hasEvent(mu, evs, vhost.EventGone) {
		t.Fatal("no gone event")
	}

	// Close removes the socket file and hangs up.
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("socket file after Close: %v", err)
	}
	if _, err := h.Reply(); err == nil {
		t.Fatal("connection alive after Close")
	}
}

func TestClientReconnect(t *testing.T) {
	path := filepath.Join(t.TempDir(), "qemu.sock")
	// The device starts before the front-end listens (QEMU not up yet).
	d, evs, mu := newDevice(t, vhost.Config{Path: path, Client: true,
		ReconnectMin: 5 * time.Millisecond, ReconnectMax: 20 * time.Millisecond})
	time.Sleep(30 * time.Millisecond)
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	for i := 0; i < 3; i++ {
		f := vhosttest.Accept(t, ln)
		if got := f.CallU64(vhosttest.ReqGetFeatures); got != d.Info().Offered {
			t.Fatalf("round %d: features %#x", i, got)
		}
		f.Negotiate(vhosttest.DefaultFeatures, vhosttest.ProtocolQEMU)
		// The front-end restarts: the device comes back.
		_ = f.Close()
	}
	_ = vhosttest.Accept(t, ln)
	mu.Lock()
	n := 0
	for _, e := range *evs {
		if e.Kind == vhost.EventConnected {
			n++
		}
	}
	mu.Unlock()
	if n < 3 {
		t.Fatalf("%d connected events", n)
	}
	// Close stops the reconnecting.
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	_ = ln.SetDeadline(time.Now().Add(100 * time.Millisecond))
	if c, err := ln.AcceptUnix(); err == nil {
		c.Close()
		// One attempt may have been in flight; no more after that.
		_ = ln.SetDeadline(time.Now().Add(100 * time.Millisecond))
		if c, err := ln.AcceptUnix(); err == nil {
			c.Close()
			t.Fatal("device kept connecting after Close")
		}
	}
}
