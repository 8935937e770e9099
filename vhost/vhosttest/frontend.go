package vhosttest

import (
	"net"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/xvswitch/xvswitch/vhost"
)

// Timeout bounds every wait of a front-end (a reply, the device closing
// the connection, a condition in WaitFor): the device runs its control
// path on its own goroutine, and a test must fail rather than hang.
const Timeout = 5 * time.Second

// FrontEnd is one vhost-user front-end connection and the guest behind it:
// its memory, its rings and their eventfds. Reconnect replaces the
// connection and the guest in place, so the *FrontEnd a test holds stays
// valid across a front-end restart.
type FrontEnd struct {
	t testing.TB
	// dial makes a new connection the way the first one was made.
	dial func() *net.UnixConn
	c    *net.UnixConn
	dev  *vhost.Device
	// srv is the device's ServeConn of this connection (Connect only:
	// nil for Dial and Accept).
	srv *serving

	protocol uint64  // negotiated protocol features
	last     Request // the last request sent, whose reply Reply reads
	opts     *Options

	g       *guest  // nil until NewMemory
	rings   []*Ring // by vring index, nil where none is set up
	kickFDs []int   // by vring index: the eventfd Kick writes, or -1
	callFDs []int   // by vring index: the eventfd WaitCall reads, or -1
}

// Connect serves one end of a new socketpair on dev (Device.ServeConn, as
// for a socketless device) and returns the front-end at the other end. The
// device needs no socket file; a device with one serves this connection
// the same way, one front-end at a time.
func Connect(t testing.TB, dev *vhost.Device) *FrontEnd {
	t.Helper()
	f := &FrontEnd{t: t, dev: dev}
	f.dial = f.socketpair
	return f.attach()
}

// Dial connects to the socket of a server-mode device, as QEMU with a
// vhost-user chardev in client mode does.
func Dial(t testing.TB, path string) *FrontEnd {
	t.Helper()
	f := &FrontEnd{t: t}
	f.dial = func() *net.UnixConn {
		c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: path, Net: "unix"})
		if err != nil {
			f.t.Fatal(err)
		}
		return c
	}
	return f.attach()
}

// Accept waits for a client-mode device to connect to ln, as QEMU with a
// server chardev does.
func Accept(t testing.TB, ln *net.UnixListener) *FrontEnd {
	t.Helper()
	f := &FrontEnd{t: t}
	f.dial = func() *net.UnixConn {
		_ = ln.SetDeadline(time.Now().Add(Timeout))
		c, err := ln.AcceptUnix()
		if err != nil {
			f.t.Fatalf("device did not connect: %v", err)
		}
		return c
	}
	return f.attach()
}

func (f *FrontEnd) attach() *FrontEnd {
	f.t.Helper()
	f.c = f.dial()
	f.t.Cleanup(func() { _ = f.Close() })
	return f
}

// socketpair is Connect's dial: a new socketpair whose far end the device
// serves.
func (f *FrontEnd) socketpair() *net.UnixConn {
	f.t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		f.t.Fatal(err)
	}
	back, front := f.fileConn(fds[0]), f.fileConn(fds[1])
	srv := &serving{done: make(chan struct{})}
	f.srv = srv
	go func() {
		srv.err = f.dev.ServeConn(back)
		close(srv.done)
	}()
	return front
}

// serving is one ServeConn call: done is closed when it returns err. It is
// its own value so that a call that outlives its front-end's connection
// (a test that failed waiting for it) cannot race with the next one.
type serving struct {
	done chan struct{}
	err  error
}

func (f *FrontEnd) fileConn(fd int) *net.UnixConn {
	f.t.Helper()
	file := os.NewFile(uintptr(fd), "socketpair")
	c, err := net.FileConn(file)
	_ = file.Close()
	if err != nil {
		f.t.Fatal(err)
	}
	return c.(*net.UnixConn)
}

// Conn is the connection, for tests that write bytes no message encoder
// makes or half-close it.
func (f *FrontEnd) Conn() *net.UnixConn { return f.c }

// Served is closed once the device's ServeConn for this connection has
// returned (Connect only; nil otherwise). Close and WaitClosed return its
// result.
func (f *FrontEnd) Served() <-chan struct{} {
	if f.srv == nil {
		return nil
	}
	return f.srv.done
}

// Close hangs up, as a front-end that exits does, and frees the guest: its
// memory, memfds and eventfds. For a Connect front-end it waits for
// ServeConn to return and returns its result (nil: the device saw a clean
// hang-up). Closing again does nothing.
func (f *FrontEnd) Close() error {
	if f.c == nil {
		return nil
	}
	_ = f.c.Close()
	f.c = nil
	err := f.waitServed()
	f.freeGuest()
	return err
}

// WaitClosed waits for the device to close the connection (it broke the
// session) and, for a Connect front-end, returns ServeConn's result.
func (f *FrontEnd) WaitClosed() error {
	f.t.Helper()
	_ = f.c.SetReadDeadline(time.Now().Add(Timeout))
	var b [64]byte
	for {
		_, err := f.c.Read(b[:])
		if isHangUp(err) {
			break
		}
		if err != nil {
			f.t.Fatalf("waiting for the back-end to close: %v", err)
		}
	}
	return f.waitServed()
}

func (f *FrontEnd) waitServed() error {
	if f.srv == nil {
		return nil
	}
	select {
	case <-f.srv.done:
		return f.srv.err
	case <-time.After(Timeout):
		f.t.Errorf("ServeConn did not return %v after the connection closed", Timeout)
		return nil
	}
}

// Reconnect plays a front-end restart: Close, a new connection made as the
// first was (a new socketpair, a new dial, or the next accept), and, if
// Start had run, Start again with the same options over fresh memory and
// rings. Why the old session ended (Close's result) is not its concern.
func (f *FrontEnd) Reconnect() {
	f.t.Helper()
	_ = f.Close()
	f.srv, f.protocol, f.last = nil, 0, 0
	f.c = f.dial()
	if o := f.opts; o != nil {
		f.Start(*o)
	}
}
