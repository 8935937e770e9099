package vswitch

import (
	"errors"
	"strings"
	"testing"

	"github.com/xvswitch/xvswitch/ctl"
)

// TestHandle: the control requests reach the switch: show answers from its
// state, add-port parses its spec (a bad one adds nothing), del-port of an
// unknown port and unknown ops are errors.
func TestHandle(t *testing.T) {
	s := startTestSwitch(t, Config{})
	a := newFakePort()
	if err := s.AddPort("a", a, 0x0200_0000_0001); err != nil {
		t.Fatal(err)
	}
	resp := s.Handle(ctl.Request{Op: ctl.OpShowPorts})
	if resp.Error != "" || len(resp.Ports) != 1 || resp.Ports[0].Name != "a" || resp.Ports[0].Kind != "fake" {
		t.Fatalf("show-ports: %+v", resp)
	}
	resp = s.Handle(ctl.Request{Op: ctl.OpShowFDB})
	if len(resp.FDB) != 1 || resp.FDB[0] != (ctl.FDBRow{MAC: "02:00:00:00:00:01", Port: "a", Static: true}) {
		t.Fatalf("show-fdb: %+v", resp)
	}
	if resp = s.Handle(ctl.Request{Op: ctl.OpShowStats}); len(resp.Stats) != 1 || resp.Stats[0].Name != "a" {
		t.Fatalf("show-stats: %+v", resp)
	}
	for _, bad := range []ctl.Request{
		{Op: ctl.OpAddPort, NIC: "eth9,mode=bogus"},
		{Op: ctl.OpAddPort, Vhost: "/tmp/x.sock,queues=0"},
		{Op: ctl.OpAddPort},
		{Op: ctl.OpAddPort, NIC: "eth9", Vhost: "/tmp/x.sock"},
	} {
		if resp := s.Handle(bad); !strings.Contains(resp.Error, "bad port spec") {
			t.Errorf("%+v: error %q, want a bad port spec", bad, resp.Error)
		}
	}
	if resp := s.Handle(ctl.Request{Op: ctl.OpDelPort, Name: "nope"}); !strings.Contains(resp.Error, ErrNoPort.Error()) {
		t.Errorf("deleting an unknown port: %q", resp.Error)
	}
	if resp := s.Handle(ctl.Request{Op: "frobnicate"}); !strings.Contains(resp.Error, ErrUnknownOp.Error()) {
		t.Errorf("unknown op: %q", resp.Error)
	}
	if err := s.AddPort("a", newFakePort(), 0); !errors.Is(err, ErrPortExists) {
		t.Errorf("a second port a: %v, want ErrPortExists", err)
	}
	if resp := s.Handle(ctl.Request{Op: ctl.OpDelPort, Name: "a"}); resp.Error != "" || !a.closed {
		t.Errorf("del-port a: %q, closed %v", resp.Error, a.closed)
	}
	if resp := s.Handle(ctl.Request{Op: ctl.OpShowPorts}); len(resp.Ports) != 0 {
		t.Errorf("ports after del-port: %+v", resp.Ports)
	}
}
