package vswitch

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/xvswitch/xvswitch/ctl"
	"github.com/xvswitch/xvswitch/portspec"
	"github.com/xvswitch/xvswitch/vhost"
	"github.com/xvswitch/xvswitch/vhost/vhosttest"
	"github.com/xvswitch/xvswitch/virtq"
)

// These tests drive the switch's vhost port (vhostport.go) with in-process
// vhost-user front-ends (vhost/vhosttest) over memfd guest memory: no VM,
// no root.

// guest is one vhost port of the switch and the front-end playing its VM.
type guest struct {
	name string
	path string // the port's socket
	mac  uint64
	fe   *vhosttest.FrontEnd
}

// addGuest adds a vhost port named name (server mode, socket in a temp
// dir) with a configured MAC, connects a front-end and brings it up with
// o, and waits until the port is ready.
func addGuest(t *testing.T, s *Switch, name string, mac uint64, o vhosttest.Options) *guest {
	t.Helper()
	return addGuestSpec(t, s, portspec.Vhost{Name: name, MAC: MACString(mac)}, mac, o)
}

// addGuestSpec is addGuest for a port built from spec (its Path and Queues
// filled in here) whose guest sends from mac, configured or not.
func addGuestSpec(t *testing.T, s *Switch, spec portspec.Vhost, mac uint64, o vhosttest.Options) *guest {
	t.Helper()
	name := spec.Name
	path := filepath.Join(t.TempDir(), name+".sock")
	spec.Path, spec.Queues = path, max(o.QueuePairs, 1)
	if err := s.AddVhost(spec); err != nil {
		t.Fatal(err)
	}
	g := &guest{name: name, path: path, mac: mac, fe: vhosttest.Dial(t, path)}
	g.fe.Start(o)
	waitFor(t, name+" ready", func() bool { return portState(s, name) == "ready" })
	return g
}

func portState(s *Switch, name string) string {
	for _, p := range s.Ports() {
		if p.Name == name {
			return p.State
		}
	}
	return ""
}

func portStats(s *Switch, name string) ctl.PortCounters {
	for _, p := range s.Stats() {
		if p.Name == name {
			return p
		}
	}
	return ctl.PortCounters{}
}

// frameTo is a frame from g to the MAC dst with a payload that says which.
func (g *guest) frameTo(dst uint64, i int) []byte {
	return ethFrame(dst, g.mac, fmt.Sprintf("%s->%012x #%03d %s", g.name, dst, i, strings.Repeat("x", 40)))
}

// receive collects what arrives on g's queue pair p until it has n frames.
func (g *guest) receive(t *testing.T, p, n int) [][]byte {
	t.Helper()
	var got [][]byte
	waitFor(t, fmt.Sprintf("%d frames at %s", n, g.name), func() bool {
		for _, r := range g.fe.Receive(p) {
			got = append(got, r.Frame)
		}
		return len(got) >= n
	})
	return got
}

// TestVhostForwardsBetweenGuests: unicast between two guests on the
// learning bridge arrives byte for byte on every ring pairing, both ways,
// and the counters balance.
func TestVhostForwardsBetweenGuests(t *testing.T) {
	for _, tc := range []struct{ a, b bool }{{true, true}, {false, false}, {true, false}} {
		t.Run(fmt.Sprintf("%s-%s", ringName(tc.a), ringName(tc.b)), func(t *testing.T) {
			s := startTestSwitch(t, Config{Workers: 1})
			a := addGuest(t, s, "a", 0x0252_5400_0001, vhosttest.Options{Packed: tc.a})
			b := addGuest(t, s, "b", 0x0252_5400_0002, vhosttest.Options{Packed: tc.b})
			const n = 100 // more than a burst, less than a ring
			a.fe.PostRx(0, n)
			b.fe.PostRx(0, n)
			var toB, toA [][]byte
			for i := 0; i < n; i++ {
				toB = append(toB, a.frameTo(b.mac, i))
				toA = append(toA, b.frameTo(a.mac, i))
			}
			if sent := a.fe.Send(0, toB...); sent != n {
				t.Fatalf("a sent %d of %d", sent, n)
			}
			if sent := b.fe.Send(0, toA...); sent != n {
				t.Fatalf("b sent %d of %d", sent, n)
			}
			for _, c := range []struct {
				at   *guest
				want [][]byte
			}{{b, toB}, {a, toA}} {
				got := c.at.receive(t, 0, n)
				for i := range c.want {
					if !bytes.Equal(got[i], c.want[i]) {
						t.Fatalf("frame %d at %s:\n%q\nwant\n%q", i, c.at.name, got[i], c.want[i])
					}
				}
			}
			waitFor(t, "counters", func() bool { return portStats(s, "a").TxPackets == n && portStats(s, "b").TxPackets == n })
			if st := portStats(s, "a"); st.RxPackets != n || len(st.Drops) != 0 {
				t.Errorf("a: %+v", st)
			}
			balance(t, s)
		})
	}
}

// TestVhostDropsByReason: what the vhost port cannot deliver or accept is
// counted under its reason: a guest with no receive buffers
// (no_rx_buffers), a port with no guest (port_down), a frame too short to
// switch (malformed) and one longer than the device's MTU (too_long, the
// guest's TX side).
func TestVhostDropsByReason(t *testing.T) {
	s := startTestSwitch(t, Config{Workers: 1})
	a := addGuest(t, s, "a", 0x0252_5400_0001, vhosttest.Options{Packed: true})
	b := addGuest(t, s, "b", 0x0252_5400_0002, vhosttest.Options{})
	// No guest ever connects to c.
	if err := s.AddVhost(portspec.Vhost{Name: "c", Path: filepath.Join(t.TempDir(), "c.sock"), Queues: 1, MAC: "02:52:54:00:00:03"}); err != nil {
		t.Fatal(err)
	}
	b.fe.PostRx(0, 2)
	var frames [][]byte
	for i := 0; i < 5; i++ {
		frames = append(frames, a.frameTo(b.mac, i))
	}
	frames = append(frames,
		a.frameTo(0x0252_5400_0003, 5),                     // to c: no guest
		a.frameTo(b.mac, 6)[:10],                           // no Ethernet header
		append(a.frameTo(b.mac, 7), make([]byte, 1600)...), // longer than 1514
	)
	if sent := a.fe.Send(0, frames...); sent != len(frames) {
		t.Fatalf("a sent %d of %d", sent, len(frames))
	}
	got := b.receive(t, 0, 2)
	if !bytes.Equal(got[0], frames[0]) || !bytes.Equal(got[1], frames[1]) {
		t.Fatalf("b got %q", got)
	}
	waitFor(t, "every frame counted", func() bool { return portStats(s, "a").RxPackets == uint64(len(frames)) })
	want := map[string]map[string]uint64{
		"a": {"malformed": 1, "too_long": 1},
		"b": {"no_rx_buffers": 3},
		"c": {"port_down": 1},
	}
	waitFor(t, "drops by reason", func() bool {
		for name, drops := range want {
			st := portStats(s, name)
			if len(st.Drops) != len(drops) {
				return false
			}
			for r, n := range drops {
				if st.Drops[r] != n {
					return false
				}
			}
		}
		return true
	})
	if st := portStats(s, "b"); st.TxPackets != 2 {
		t.Errorf("b transmitted %d, want 2", st.TxPackets)
	}
	balance(t, s)
}

// TestVhostGuestMemoryFault: a front-end truncates the memfd behind its
// guest's memory while the worker polls its rings. Only that port is
// broken, with ErrGuestMemoryFault in its detail; a bystander pair keeps
// forwarding through the same worker.
func TestVhostGuestMemoryFault(t *testing.T) {
	// A worker that never sleeps: the fault is taken while polling (arming
	// and disarming a sleeping worker's queues is a later change's test).
	s := startTestSwitch(t, Config{Workers: 1, IdleAfter: -1})
	bad := addGuest(t, s, "bad", 0x0252_5400_0bad, vhosttest.Options{Packed: true})
	a := addGuest(t, s, "a", 0x0252_5400_0001, vhosttest.Options{Packed: true})
	b := addGuest(t, s, "b", 0x0252_5400_0002, vhosttest.Options{})
	a.fe.PostRx(0, 64)
	b.fe.PostRx(0, 64)
	bad.fe.Send(0, bad.frameTo(b.mac, 0))
	b.receive(t, 0, 1)

	bad.fe.TruncateMemory(0)
	waitFor(t, "the truncating guest's port broken", func() bool { return portState(s, "bad") == "broken" })
	for _, p := range s.Ports() {
		if p.Name == "bad" && !strings.Contains(p.Detail, ErrGuestMemoryFault.Error()) {
			t.Errorf("bad's detail says %q, want the memory fault", p.Detail)
		}
	}
	for i := 0; i < 3; i++ {
		want := a.frameTo(b.mac, i)
		a.fe.Send(0, want)
		if got := b.receive(t, 0, 1); !bytes.Equal(got[0], want) {
			t.Fatalf("bystander frame %d: %q", i, got[0])
		}
		back := b.frameTo(a.mac, i)
		b.fe.Send(0, back)
		if got := a.receive(t, 0, 1); !bytes.Equal(got[0], back) {
			t.Fatalf("bystander reply %d: %q", i, got[0])
		}
	}
	if st := s.Ports(); len(st) != 3 {
		t.Fatalf("ports after the fault: %+v", st)
	}
}

// TestVhostReconnect: a guest's front-end goes away (its port waits, its
// frames are port_down) and a new one connects on the same socket; traffic
// flows again, both ways, on the other ring kind. Then the same front-end
// restarts in place (Reconnect) and traffic flows once more.
func TestVhostReconnect(t *testing.T) {
	s := startTestSwitch(t, Config{Workers: 1})
	a := addGuest(t, s, "a", 0x0252_5400_0001, vhosttest.Options{Packed: true})
	b := addGuest(t, s, "b", 0x0252_5400_0002, vhosttest.Options{Packed: true})
	b.fe.PostRx(0, 8)
	a.fe.Send(0, a.frameTo(b.mac, 0))
	b.receive(t, 0, 1)

	if err := b.fe.Close(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "b waiting for a guest", func() bool { return portState(s, "b") == "waiting" })
	a.fe.Send(0, a.frameTo(b.mac, 1))
	waitFor(t, "the frame to the absent guest counted", func() bool { return portStats(s, "b").Drops["port_down"] == 1 })

	b.fe = vhosttest.Dial(t, b.path)
	b.fe.Start(vhosttest.Options{}) // the new guest offers split rings only
	waitFor(t, "b ready again", func() bool { return portState(s, "b") == "ready" })
	b.fe.PostRx(0, 8)
	a.fe.PostRx(0, 8)
	want := a.frameTo(b.mac, 2)
	a.fe.Send(0, want)
	if got := b.receive(t, 0, 1); !bytes.Equal(got[0], want) {
		t.Fatalf("after reconnect b got %q", got[0])
	}
	back := b.frameTo(a.mac, 3)
	b.fe.Send(0, back)
	if got := a.receive(t, 0, 1); !bytes.Equal(got[0], back) {
		t.Fatalf("after reconnect a got %q", got[0])
	}
	b.fe.Reconnect()
	waitFor(t, "b ready after a restart in place", func() bool { return portState(s, "b") == "ready" })
	b.fe.PostRx(0, 8)
	want = a.frameTo(b.mac, 4)
	a.fe.Send(0, want)
	if got := b.receive(t, 0, 1); !bytes.Equal(got[0], want) {
		t.Fatalf("after a restart in place b got %q", got[0])
	}
	balance(t, s)
}

// TestVhostMemoryHotPlug: a guest's front-end plugs a memory region
// (ADD_MEM_REG) and unplugs one (REM_MEM_REG) while its frames are in the
// switch, on both ring kinds:
//   - the frames sent just before each change arrive, and so do those
//     after, both ways, byte for byte;
//   - once the guest's buffers are in the added region, the switch reads
//     the frames it sends from there and writes those it receives there;
//   - a descriptor into the removed region afterwards never reaches
//     memory: the ring rejects its address and that guest's device is
//     broken with the reason (the chain never became a frame, so no drop
//     is due); a new front-end on the port forwards again;
//   - the counters balance.
func TestVhostMemoryHotPlug(t *testing.T) {
	for _, packed := range []bool{true, false} {
		t.Run(ringName(packed), func(t *testing.T) {
			s := startTestSwitch(t, Config{Workers: 1})
			a := addGuest(t, s, "a", 0x0252_5400_0011, vhosttest.Options{Packed: packed})
			b := addGuest(t, s, "b", 0x0252_5400_0012, vhosttest.Options{Packed: true})
			const n = 40
			// inFlight sends n frames from a to b, runs change while the
			// switch has them, and checks they all arrive.
			inFlight := func(what string, change func()) [][]byte {
				t.Helper()
				b.fe.PostRx(0, n)
				var want [][]byte
				for i := 0; i < n; i++ {
					want = append(want, a.frameTo(b.mac, i))
				}
				if sent := a.fe.Send(0, want...); sent != n {
					t.Fatalf("%s: a sent %d of %d", what, sent, n)
				}
				change()
				got := b.receiveFrom(t, 0, n, a.mac)
				for i := range want {
					if !bytes.Equal(got[i], want[i]) {
						t.Fatalf("%s: frame %d: %q", what, i, got[i])
					}
				}
				return want
			}
			exchange(t, a, b, n)

			var k int
			inFlight("plug", func() { k = a.fe.AddRegion(4 << 20) })
			if inf := vhostInfo(t, s, "a"); inf.Regions != 3 {
				t.Fatalf("a's device has %d regions after ADD_MEM_REG", inf.Regions)
			}
			a.fe.UseBufferRegion(k)
			exchange(t, a, b, n)
			added := a.fe.Mem().Regions[2] // k in Regions, 2 in Mem: nothing removed yet
			sent := inFlight("after plug", func() {})
			if !bytes.Contains(added.Host, sent[n-1]) {
				t.Fatal("a's frame was not sent from the added region")
			}
			toA := b.frameTo(a.mac, 999)
			a.fe.PostRx(0, 1)
			if b.fe.Send(0, toA) != 1 {
				t.Fatal("b could not send")
			}
			a.receiveFrom(t, 0, 1, b.mac)
			if !bytes.Contains(added.Host, toA) {
				t.Fatal("the frame for a was not written into the added region")
			}

			removed := a.fe.Regions()[1]
			inFlight("unplug", func() { a.fe.RemoveRegion(1) })
			if inf := vhostInfo(t, s, "a"); inf.Regions != 2 {
				t.Fatalf("a's device has %d regions after REM_MEM_REG", inf.Regions)
			}
			exchange(t, a, b, n)
			balance(t, s)

			// The removed region's addresses are outside a's memory now.
			if _, err := a.fe.TxRing(0).Add(vhosttest.Buf{Addr: removed.GuestAddr + 0x100, Len: 200}); err != nil {
				t.Fatal(err)
			}
			a.fe.Kick(1)
			if err := a.fe.WaitClosed(); err != nil {
				t.Fatal(err)
			}
			waitFor(t, "a down", func() bool { return portState(s, "a") != "ready" })
			if err := vhostInfo(t, s, "a").LastError; !errors.Is(err, virtq.ErrBadAddress) {
				t.Fatalf("a's device ended with %v, want a bad address", err)
			}
			balance(t, s)
			// A new front-end on a's port, fresh memory: both forward.
			a.fe.Reconnect()
			waitFor(t, "a ready again", func() bool { return portState(s, "a") == "ready" })
			exchange(t, a, b, n)
			balance(t, s)
		})
	}
}

// vhostInfo is the state of the vhost device behind port name.
func vhostInfo(t *testing.T, s *Switch, name string) vhost.Info {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range s.ports {
		if p != nil && p.name == name {
			if vp, ok := p.drv.(*vhostPort); ok {
				return vp.dev.Info()
			}
		}
	}
	t.Fatalf("no vhost port %s", name)
	return vhost.Info{}
}
