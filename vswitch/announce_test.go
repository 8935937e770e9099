package vswitch

import (
	"bytes"
	"net"
	"strings"
	"testing"

	"github.com/xvswitch/xvswitch/portspec"
	"github.com/xvswitch/xvswitch/vhost"
	"github.com/xvswitch/xvswitch/vhost/vhosttest"
)

func fdbPort(s *Switch, mac uint64) string {
	for _, r := range s.FDB() {
		if r.MAC == MACString(mac) {
			return r.Port
		}
	}
	return ""
}

// TestSendRARPAnnounces: a guest migrated to a new port whose front-end
// sends SEND_RARP (the guest cannot announce itself): the switch moves the
// guest's MAC to the new port and sends a broadcast RARP from it out of
// every other port, counted as a flood from the new port.
func TestSendRARPAnnounces(t *testing.T) {
	s := startTestSwitch(t, Config{Workers: 1})
	const mover, other = 0x0252_5400_0011, 0x0252_5400_0033
	o := vhosttest.Options{Protocol: vhosttest.ProtocolMigrate}
	old := addGuestSpec(t, s, portspec.Vhost{Name: "old"}, mover, o)
	dst := addGuestSpec(t, s, portspec.Vhost{Name: "new"}, mover, o)
	by := addGuestSpec(t, s, portspec.Vhost{Name: "by"}, other, o)
	old.fe.PostRx(0, 4)
	dst.fe.PostRx(0, 4)
	by.fe.PostRx(0, 4)
	// The guest, still at its old place, talks to the bystander.
	old.fe.Send(0, old.frameTo(other, 0))
	by.receive(t, 0, 1)
	if p := fdbPort(s, mover); p != "old" {
		t.Fatalf("the guest's MAC is on %q, want old", p)
	}
	mac := net.HardwareAddr{0x02, 0x52, 0x54, 0, 0, 0x11}
	dst.fe.MustAck(vhosttest.ReqSendRARP, append(append([]byte(nil), mac...), 0, 0))
	waitFor(t, "the MAC on the new port", func() bool { return fdbPort(s, mover) == "new" })
	want := vhost.RARPFrame(mac)
	for _, g := range []*guest{old, by} {
		got := g.receive(t, 0, 1)
		if !bytes.Equal(got[0], want[:]) {
			t.Fatalf("%s received %x, want the RARP %x", g.name, got[0], want)
		}
	}
	waitFor(t, "the RARP counted", func() bool { return portStats(s, "new").RxPackets == 1 })
	if st := portStats(s, "new"); st.FloodCopies != 1 || len(st.Drops) != 0 {
		t.Fatalf("new: %+v, want 1 received, flooded to 2 ports", st)
	}
	balance(t, s)
}

// `show ports` says which guest is migrating away (its device logs).
func TestVhostPortShowsMigrating(t *testing.T) {
	s := startTestSwitch(t, Config{Workers: 1})
	g := addGuestSpec(t, s, portspec.Vhost{Name: "vm"}, 0x0252_5400_0044, vhosttest.Options{Protocol: vhosttest.ProtocolMigrate})
	detail := func() string {
		for _, p := range s.Ports() {
			if p.Name == "vm" {
				return p.Detail
			}
		}
		return ""
	}
	if d := detail(); strings.Contains(d, "migrating") {
		t.Fatalf("before logging: %q", d)
	}
	g.fe.StartLogging()
	if d := detail(); !strings.Contains(d, " migrating") {
		t.Fatalf("while logging: %q", d)
	}
	g.fe.StopLogging()
	if d := detail(); strings.Contains(d, "migrating") {
		t.Fatalf("after logging: %q", d)
	}
}
