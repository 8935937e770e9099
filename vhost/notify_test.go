package vhost_test

import (
	"errors"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/xvswitch/xvswitch/vhost"
	"github.com/xvswitch/xvswitch/vhost/vhosttest"
	"github.com/xvswitch/xvswitch/virtionet"
)

// TestErrFDFull: the error eventfd is written when the device breaks,
// with the device's lock held. One that blocks (a blocking eventfd filled
// to its maximum) must not hold up the control path: the session ends,
// Info answers, and once the teardown clears the counter the front-end
// finds the error signalled.
func TestErrFDFull(t *testing.T) {
	s := startSession(t, vhost.Config{}, false, vhosttest.DefaultFeatures)
	fd := vhosttest.FullEventFD(t)
	defer unix.Close(fd)
	s.f.MustAck(vhosttest.ReqSetVringErr, vhosttest.U64(0), fd)
	// A message that breaks the session.
	if err := s.f.SendMsg(vhosttest.ReqGetFeatures, 0x2, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.f.WaitClosed(); !errors.Is(err, vhost.ErrBadVersion) {
		t.Fatalf("session ended with %v", err)
	}
	info := make(chan vhost.Info, 1)
	go func() { info <- s.d.Info() }()
	select {
	case inf := <-info:
		if inf.Connected || !errors.Is(inf.LastError, vhost.ErrBadVersion) {
			t.Fatalf("Info after the break: %+v", inf)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Info did not answer: the control path is stuck on the error eventfd")
	}
	vhosttest.WaitFor(t, "the error signalled", func() bool {
		c, err := virtionet.ReadEventFD(fd)
		if err != nil {
			t.Fatal(err)
		}
		return c == 1
	})
}
