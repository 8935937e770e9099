package vswitch

import (
	"bytes"
	"net"
	"strings"
	"testing"
	"time"

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

// TestAnnounceUnderTraffic: RARPs announced while the one worker streams
// frames between two other guests. The worker transmits without egress
// locks (it alone polls anything), so a RARP forwarded beside it, as
// announce once did on a goroutine of its own, wrote the receiving guest's
// ring under it (the race detector's report; frames lost or the ring
// broken without it). Every frame and every RARP must arrive, once, and
// the counters balance.
func TestAnnounceUnderTraffic(t *testing.T) {
	s := startTestSwitch(t, Config{Workers: 1})
	const a, b, mover = 0x0252_5400_0021, 0x0252_5400_0022, 0x0252_5400_0023
	o := vhosttest.Options{Protocol: vhosttest.ProtocolMigrate, RingSize: 1024}
	ga := addGuestSpec(t, s, portspec.Vhost{Name: "a"}, a, o)
	gb := addGuestSpec(t, s, portspec.Vhost{Name: "b"}, b, o)
	gm := addGuestSpec(t, s, portspec.Vhost{Name: "m"}, mover, o)
	const frames, rarps = 600, 200
	ga.fe.PostRx(0, rarps+8)
	gb.fe.PostRx(0, frames+rarps+8)
	// b's MAC learned first, so that a's frames go to b alone.
	gb.fe.Send(0, gb.frameTo(a, 0))
	ga.receive(t, 0, 1)
	mac := net.HardwareAddr{0x02, 0x52, 0x54, 0, 0, 0x23}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < rarps; i++ {
			gm.fe.MustAck(vhosttest.ReqSendRARP, append(append([]byte(nil), mac...), 0, 0))
		}
	}()
	for i := 0; i < frames; i += 20 {
		batch := make([][]byte, 0, 20)
		for j := i; j < i+20; j++ {
			batch = append(batch, ga.frameTo(b, j))
		}
		if n := ga.fe.Send(0, batch...); n != len(batch) {
			t.Fatalf("a sent %d of %d", n, len(batch))
		}
		time.Sleep(100 * time.Microsecond)
	}
	<-done
	want := vhost.RARPFrame(mac)
	for _, g := range []*guest{ga, gb} {
		fromA, announced := 0, 0
		waitFor(t, g.name+"'s frames", func() bool {
			for _, r := range g.fe.Receive(0) {
				f := r.Frame
				switch src := MACKey(f[6:12]); {
				case src == mover && bytes.Equal(f, want[:]):
					announced++
				case src == a && bytes.Equal(f, ga.frameTo(b, fromA)):
					fromA++
				default:
					t.Fatalf("%s received %q", g.name, f)
				}
			}
			return announced == rarps && (g == ga || fromA == frames)
		})
		if announced != rarps || g == gb && fromA != frames {
			t.Fatalf("%s received %d RARPs and %d frames of a's", g.name, announced, fromA)
		}
	}
	balance(t, s)
}
