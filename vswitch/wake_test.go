package vswitch

import (
	"bytes"
	"path/filepath"
	"testing"
	"time"

	"github.com/xvswitch/xvswitch/portspec"
	"github.com/xvswitch/xvswitch/vhost/vhosttest"
)

// A worker that has gone idle sleeps in epoll. Whatever changes while it
// sleeps (a guest sets its rings up, replaces them, goes and comes back, a
// port is added or deleted) must reach it at once: frames flow right
// away, and the control path, which waits for the pollers to let go of
// what it replaces, answers at once. Each bound below is generous for a
// shared machine; what it catches is a wait for a timeout (the worker's
// 1 s epoll timeout, vhost's 10 s releaseTimeout, the switch's 5 s).

// sleeping waits until every worker has gone to sleep once more.
func sleeping(t *testing.T, s *Switch) {
	t.Helper()
	for _, w := range s.workers {
		n := w.sleeps.Load()
		// A worker asleep already would count its next sleep only after
		// its epoll timeout: have it start over.
		w.wake()
		waitFor(t, "the workers asleep", func() bool { return w.sleeps.Load() > n })
	}
	// sleeps counts a sleep about to start: give it time to get there.
	time.Sleep(20 * time.Millisecond)
}

// within fails the test if fn takes more than a second, and says how long
// it took.
func within(t *testing.T, what string, fn func()) time.Duration {
	t.Helper()
	start := time.Now()
	fn()
	d := time.Since(start)
	if d > time.Second {
		t.Errorf("%s took %v", what, d)
	}
	return d
}

// pingPong sends a frame from g to peer and one back, and fails unless
// both arrive, each within a second.
func pingPong(t *testing.T, g, peer *guest, i int) {
	t.Helper()
	for _, d := range []struct{ from, to *guest }{{g, peer}, {peer, g}} {
		d.to.fe.PostRx(0, 1)
		want := d.from.frameTo(d.to.mac, i)
		within(t, "a frame "+d.from.name+" -> "+d.to.name, func() {
			d.from.fe.Send(0, want)
			if got := d.to.receive(t, 0, 1); !bytes.Equal(got[0], want) {
				t.Fatalf("%s got %q", d.to.name, got[0])
			}
		})
	}
}

// TestVhostLateJoinerWhileSleeping: a guest connects to a port while the
// worker sleeps. Its setup answers at once, its first frames are switched
// at once, both ways, and so are ring changes that wait for the poller
// (new kick and call eventfds on running rings) while it sleeps again.
func TestVhostLateJoinerWhileSleeping(t *testing.T) {
	for _, packed := range []bool{true, false} {
		t.Run(ringName(packed), func(t *testing.T) {
			s := startTestSwitch(t, Config{Workers: 1})
			peer := addGuest(t, s, "peer", 0x0252_5400_0002, vhosttest.Options{Packed: packed})
			late := &guest{name: "late", path: filepath.Join(t.TempDir(), "late.sock"), mac: 0x0252_5400_0001}
			if err := s.AddVhost(portspec.Vhost{Name: late.name, Path: late.path, Queues: 1, MAC: MACString(late.mac)}); err != nil {
				t.Fatal(err)
			}
			sleeping(t, s)
			late.fe = vhosttest.Dial(t, late.path)
			d := within(t, "the late joiner's setup", func() { late.fe.Start(vhosttest.Options{Packed: packed}) })
			started := time.Now()
			pingPong(t, late, peer, 0)
			t.Logf("the late joiner's setup (every request answered) took %v; its first frame and the answer were switched within %v of it", d, time.Since(started))
			for _, vring := range []int{1, 0} {
				sleeping(t, s)
				within(t, "SET_VRING_KICK while the worker sleeps", func() { late.fe.NewKick(vring) })
				sleeping(t, s)
				within(t, "SET_VRING_CALL while the worker sleeps", func() { late.fe.NewCall(vring) })
			}
			pingPong(t, late, peer, 1)
			balance(t, s)
		})
	}
}

// TestVhostReconnectWhileSleeping: a guest's front-end restarts while the
// worker sleeps (its rings are stopped, its memory unmapped, and a new
// session sets up new ones): the restart answers at once and frames flow
// at once, on the other ring kind too.
func TestVhostReconnectWhileSleeping(t *testing.T) {
	for _, packed := range []bool{true, false} {
		t.Run(ringName(packed), func(t *testing.T) {
			s := startTestSwitch(t, Config{Workers: 1})
			g := addGuest(t, s, "g", 0x0252_5400_0001, vhosttest.Options{Packed: packed})
			peer := addGuest(t, s, "peer", 0x0252_5400_0002, vhosttest.Options{Packed: packed})
			pingPong(t, g, peer, 0)
			sleeping(t, s)
			within(t, "a front-end restart", g.fe.Reconnect)
			pingPong(t, g, peer, 1)

			sleeping(t, s)
			within(t, "a front-end leaving", func() {
				if err := g.fe.Close(); err != nil {
					t.Error(err)
				}
				waitFor(t, "g waiting", func() bool { return portState(s, "g") == "waiting" })
			})
			sleeping(t, s)
			g.fe = vhosttest.Dial(t, g.path)
			within(t, "the next front-end's setup", func() { g.fe.Start(vhosttest.Options{Packed: !packed}) })
			pingPong(t, g, peer, 2)
			balance(t, s)
		})
	}
}

// TestPortAddDelWhileSleeping: ports added and deleted while both workers
// sleep; the switch waits until every worker took the new port table, so
// each change answers at once, and the new port's guest is switched at
// once, whichever worker polls it.
func TestPortAddDelWhileSleeping(t *testing.T) {
	s := startTestSwitch(t, Config{Workers: 2})
	peer := addGuest(t, s, "peer", 0x0252_5400_0002, vhosttest.Options{Packed: true})
	for i, packed := range []bool{true, false, true} {
		sleeping(t, s)
		var g *guest
		within(t, "adding a port and its guest", func() {
			g = addGuest(t, s, "new", 0x0252_5400_0001, vhosttest.Options{Packed: packed})
		})
		sleeping(t, s)
		pingPong(t, g, peer, i)
		sleeping(t, s)
		within(t, "deleting the port", func() {
			if err := s.DelPort("new"); err != nil {
				t.Fatal(err)
			}
		})
		if err := g.fe.Close(); err != nil {
			t.Log(err)
		}
	}
	balance(t, s)
}
