package vhost

import (
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
	"time"
)

// listen makes the server-mode socket at path: a stale socket file (no
// process listening) is replaced, a live one is refused, anything that is
// not a socket is left alone.
func listen(path string, mode os.FileMode, gid int) (*net.UnixListener, error) {
	if err := removeStale(path); err != nil {
		return nil, err
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("vhost: listen on %s: %w", path, err)
	}
	if err := os.Chmod(path, mode.Perm()); err != nil {
		_ = ln.Close()
		return nil, fmt.Errorf("vhost: chmod %s: %w", path, err)
	}
	if gid != 0 {
		if err := os.Lchown(path, -1, gid); err != nil {
			_ = ln.Close()
			return nil, fmt.Errorf("vhost: chgrp %s: %w", path, err)
		}
	}
	return ln, nil
}

// removeStale removes a socket file nobody listens on. Whether somebody
// does is found out the only reliable way, by connecting: the listener may
// live in another network namespace or another process.
func removeStale(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("vhost: %w", err)
	}
	if fi.Mode()&os.ModeSocket == 0 {
		return fmt.Errorf("%w: %s", ErrNotSocket, path)
	}
	c, err := net.DialTimeout("unix", path, time.Second)
	if err == nil {
		_ = c.Close()
		return fmt.Errorf("%w: %s", ErrSocketInUse, path)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		// EAGAIN (a full backlog) also means somebody listens.
		if errors.Is(err, syscall.EAGAIN) {
			return fmt.Errorf("%w: %s", ErrSocketInUse, path)
		}
		return fmt.Errorf("vhost: probing %s: %w", path, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("vhost: removing stale socket: %w", err)
	}
	return nil
}

// busyGrace is how long a new connection waits for the current one to end.
const busyGrace = 2 * time.Second

// busy reports whether a front-end connection is being served.
func (d *Device) busy() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.sess != nil
}

// acceptLoop accepts front-ends. A connection that arrives while another
// is served waits up to busyGrace for it to end, then is turned away.
func (d *Device) acceptLoop() {
	defer d.wg.Done()
	for {
		c, err := d.ln.AcceptUnix()
		if err != nil {
			if d.isClosed() {
				return
			}
			// EMFILE and friends: back off rather than spin.
			d.log.Warn("vhost accept failed", "err", err)
			if d.sleep(100 * time.Millisecond) {
				return
			}
			continue
		}
		d.wg.Add(1)
		go func() {
			defer d.wg.Done()
			// A front-end that reconnects (QEMU restarted, or another
			// process's liveness probe that has just hung up) can arrive
			// before the old connection's end is seen: give the old
			// session a moment to end before turning the new one away.
			for deadline := time.Now().Add(busyGrace); d.busy() && time.Now().Before(deadline) && !d.isClosed(); {
				time.Sleep(10 * time.Millisecond)
			}
			if err := d.ServeConn(c); errors.Is(err, ErrBusy) {
				d.log.Warn("vhost refused a second front-end connection")
			}
		}()
	}
}

// dialLoop connects to a listening front-end (client mode), serves the
// connection, and reconnects with exponential backoff whenever it ends.
func (d *Device) dialLoop() {
	defer d.wg.Done()
	backoff := d.cfg.ReconnectMin
	addr := &net.UnixAddr{Name: d.cfg.Path, Net: "unix"}
	logged := false
	for !d.isClosed() {
		c, err := net.DialUnix("unix", nil, addr)
		if err != nil {
			if !logged {
				d.log.Info("vhost waiting for the front-end's socket", "path", d.cfg.Path, "err", err)
				logged = true
			}
			if d.sleep(backoff) {
				return
			}
			backoff = min(2*backoff, d.cfg.ReconnectMax)
			continue
		}
		logged = false
		backoff = d.cfg.ReconnectMin
		_ = d.ServeConn(c)
		if d.sleep(d.cfg.ReconnectMin) {
			return
		}
	}
}

func (d *Device) isClosed() bool {
	select {
	case <-d.stop:
		return true
	default:
		return false
	}
}

// sleep waits for t and reports whether the device was closed meanwhile.
func (d *Device) sleep(t time.Duration) bool {
	tm := time.NewTimer(t)
	defer tm.Stop()
	select {
	case <-d.stop:
		return true
	case <-tm.C:
		return false
	}
}
