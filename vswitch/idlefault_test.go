package vswitch

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/xvswitch/xvswitch/vhost/vhosttest"
	"github.com/xvswitch/xvswitch/virtionet"
)

// A front-end may truncate the memfd behind its guest's memory at any
// moment, not only while the worker forwards its frames: while the worker
// sleeps (its next disarm writes the ring's event suppression), just
// before it arms, in the rebind of the first burst over a new memory table,
// or while it gives a guest's buffers back after another guest faulted.
// Each test below truncates at one of those moments and checks that only
// the truncating guest's device is broken, and that everything else
// carries on (recovered).

// brokenByFault waits until g's port is broken with ErrGuestMemoryFault as
// the reason.
func brokenByFault(t *testing.T, s *Switch, g *guest) {
	t.Helper()
	waitFor(t, g.name+" broken by the memory fault", func() bool {
		for _, p := range s.Ports() {
			if p.Name == g.name {
				return p.State == "broken" && strings.Contains(p.Detail, ErrGuestMemoryFault.Error())
			}
		}
		return false
	})
}

// recovered checks that the switch carries on after the guests in bad
// faulted: the bystander pair forwards, the control path answers at once
// (a port table, a bystander's ring change), each faulted port serves its
// next front-end and forwards to it, and once those front-ends and ports
// are gone the process has the fds it had before (fds0).
func recovered(t *testing.T, s *Switch, a, b *guest, fds0 int, bad ...*guest) {
	t.Helper()
	exchange(t, a, b, 64)
	// Nothing may sit in a timeout waiting for a poller (see within):
	// these took releaseTimeout (10 s) when a fault left a burst open.
	within(t, "the control path's answers after the fault", func() {
		s.Ports()
		a.fe.NewCall(0) // republishes a's RX ring: waits for its poller
	})
	for _, g := range bad {
		within(t, g.name+"'s next front-end's setup", func() {
			g.fe.Reconnect()
			waitFor(t, g.name+" ready again", func() bool { return portState(s, g.name) == "ready" })
		})
		g.fe.PostRx(0, 1)
		want := a.frameTo(g.mac, 0)
		a.fe.Send(0, want)
		if got := g.receive(t, 0, 1); !bytes.Equal(got[0], want) {
			t.Fatalf("%s after reconnecting got %q", g.name, got[0])
		}
	}
	exchange(t, a, b, 64)
	for _, g := range bad {
		if err := g.fe.Close(); err != nil {
			t.Error(err)
		}
		within(t, "deleting "+g.name, func() {
			if err := s.DelPort(g.name); err != nil {
				t.Fatal(err)
			}
		})
	}
	waitFor(t, "fds back to what they were before the faulting guests", func() bool { return openFDs(t) == fds0 })
}

// truncating runs, on each ring kind, a switch with cfg, the bystander pair
// (a, b) and a guest named bad; truncate is what bad does to its memory.
// bad must end up broken by the fault, and the switch recovered.
func truncating(t *testing.T, cfg Config, truncate func(t *testing.T, s *Switch, a, b, bad *guest)) {
	for _, packed := range []bool{true, false} {
		t.Run(ringName(packed), func(t *testing.T) {
			s := startTestSwitch(t, cfg)
			a, b := bystanders(t, s)
			fds0 := openFDs(t)
			bad := addGuest(t, s, "bad", 0x0252_5400_0bad, vhosttest.Options{Packed: packed})
			truncate(t, s, a, b, bad)
			brokenByFault(t, s, bad)
			recovered(t, s, a, b, fds0, bad)
		})
	}
}

// TestVhostFaultWhileSleeping: a guest truncates its memory while the
// worker sleeps, then kicks. The worker wakes, and disarming the guest's
// ring (its event suppression, in the truncated memory) faults: outside
// any burst, so nothing recovered it and the process died.
func TestVhostFaultWhileSleeping(t *testing.T) {
	truncating(t, Config{Workers: 1}, func(t *testing.T, s *Switch, _, _, bad *guest) {
		sleeping(t, s)
		bad.fe.TruncateMemory(0)
		bad.fe.Kick(1)
	})
}

// The areas of a ring moveToTail can move.
const (
	areaDesc = 1 << iota
	areaDriver
	areaDevice
)

// moveToTail moves the areas of g's vring that which names to the end of
// g's buffer region, where nothing else lives, and returns the size to
// truncate that region's memfd to so that only they are cut off: the
// ring's other areas and the guest's frame buffers stay. The device stops
// the ring and restarts it over the new areas from its state, so nothing
// may be in flight; the guest's driver model keeps using the old ones,
// which is all these tests need of it. Once per guest.
func moveToTail(t *testing.T, g *guest, vring, which int) (cut int64) {
	t.Helper()
	m := g.fe.Mem()
	r := m.Regions[1]
	m.Alloc(1, r.Size/2, 4096) // frame buffers come from the start of the region
	tail := m.Alloc(1, 32<<10, 4096)
	cfg := g.fe.RxRing(0).Config()
	if vring%2 == 1 {
		cfg = g.fe.TxRing(vring / 2).Config()
	}
	if which&areaDesc != 0 {
		cfg.Desc = m.User(tail)
	}
	if which&areaDriver != 0 {
		cfg.Driver = m.User(tail + 16<<10)
	}
	if which&areaDevice != 0 {
		cfg.Device = m.User(tail + 24<<10)
	}
	g.fe.MustAck(vhosttest.ReqSetVringAddr, vhosttest.VringAddr(uint32(vring), cfg.Desc, cfg.Device, cfg.Driver))
	return int64(tail - r.GuestAddr)
}

// TestVhostFaultWhileArming: the memory behind a guest's event suppression
// goes away while the worker polls; the guest's rings still poll fine, and
// the fault comes when the worker goes idle and arms the ring.
func TestVhostFaultWhileArming(t *testing.T) {
	// Long enough that the worker is still polling when the memory goes,
	// so that it arms (not disarms) first.
	cfg := Config{Workers: 1, IdleAfter: 300 * time.Millisecond}
	truncating(t, cfg, func(t *testing.T, s *Switch, a, _, bad *guest) {
		cut := moveToTail(t, bad, 1, areaDevice) // where arming writes
		bad.fe.PostRx(0, 1)
		a.fe.Send(0, a.frameTo(bad.mac, 0))
		bad.receive(t, 0, 1) // the worker polls for 300 ms after this
		polled := time.Now()
		if err := unix.Ftruncate(bad.fe.MemFDs()[1], cut); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(polled); d > 200*time.Millisecond {
			t.Logf("the truncation came %v after the last frame: the worker may have slept, and faulted disarming", d)
		}
	})
}

// TestVhostFaultFirstBurstAfterMemTable: a guest replaces its memory table
// and truncates the memory before anything was transmitted to it. Its
// receive ring is rebound to the new table in the first burst that is
// (vhost's rebind, inside Begin: the ring is told not to kick, in the new
// memory), and that faults. With the guest's transmit ring running (and
// already rebound, by the worker's polls), the fault was pinned on the
// guest, but the receive ring's Begin was never ended: the guest's
// teardown waited 10 s for it, leaked the mappings, and its next front-end
// never got a frame. With the transmit ring stopped, no queue of the
// guest had seen the new memory: the fault was nobody's, and the process
// died.
func TestVhostFaultFirstBurstAfterMemTable(t *testing.T) {
	for _, tx := range []string{"tx-running", "tx-stopped"} {
		t.Run(tx, func(t *testing.T) {
			truncating(t, Config{Workers: 1}, func(t *testing.T, s *Switch, a, b, bad *guest) {
				bad.fe.PostRx(0, 1)
				a.fe.Send(0, a.frameTo(bad.mac, 0))
				bad.receive(t, 0, 1)
				if tx == "tx-stopped" {
					bad.fe.Call(vhosttest.ReqGetVringBase, vhosttest.VringState(1, 0))
				}
				bad.fe.SetMemTable()
				// The second exchange is switched in a round of polls
				// that starts after the first ended: the round before
				// polled bad's transmit ring (rebinding it, if it runs,
				// while the memory is still there).
				exchange(t, a, b, 1)
				exchange(t, a, b, 1)
				bad.fe.TruncateMemory(0)
				a.fe.Send(0, a.frameTo(bad.mac, 1))
			})
		})
	}
}

// TestVhostFaultInReleaseAfterAnotherFault: a guest's frame goes to a
// guest whose memory is gone (the first fault), and giving the sender's
// buffers back faults too, on the sender's memory (the second fault). Both
// guests are broken; neither queue stays owned by the interrupted burst.
func TestVhostFaultInReleaseAfterAnotherFault(t *testing.T) {
	for _, packed := range []bool{true, false} {
		t.Run(ringName(packed), func(t *testing.T) {
			// Never sleeping: the fault must come in the burst, not in
			// arming or disarming.
			s := startTestSwitch(t, Config{Workers: 1, IdleAfter: -1})
			a, b := bystanders(t, s)
			fds0 := openFDs(t)
			sender := addGuest(t, s, "sender", 0x0252_5400_05e0, vhosttest.Options{Packed: packed})
			dest := addGuest(t, s, "dest", 0x0252_5400_0de5, vhosttest.Options{Packed: packed})
			// The sender's frame is in a buffer placed before moveToTail
			// takes the rest of the region: it stays readable after the
			// cut, and so does the sender's TX ring but for what giving
			// buffers back touches (split: the used ring; packed: the
			// driver's event suppression, read to decide on an interrupt).
			m := sender.fe.Mem()
			buf := m.Alloc(1, 2048, 64)
			msg := append(make([]byte, virtionet.HeaderLen), sender.frameTo(dest.mac, 0)...)
			copy(m.Bytes(buf, uint64(len(msg))), msg)
			back := areaDevice // split: the used ring
			if packed {
				back |= areaDriver // the split ring's driver area is its avail ring
			}
			senderCut := moveToTail(t, sender, 1, back)
			// dest's whole RX ring goes, its TX ring stays: polling dest
			// does not fault, transmitting to it does.
			destCut := moveToTail(t, dest, 0, areaDesc|areaDriver|areaDevice)
			// One frame to dest (dropped: no buffers) rebinds its RX ring
			// over the new areas before they go, so the fault below is in
			// delivering, not in vhost's rebind.
			a.fe.Send(0, a.frameTo(dest.mac, 0))
			waitFor(t, "the frame to dest dropped", func() bool { return portStats(s, "dest").Drops["no_rx_buffers"] == 1 })
			for _, c := range []struct {
				g   *guest
				cut int64
			}{{sender, senderCut}, {dest, destCut}} {
				if err := unix.Ftruncate(c.g.fe.MemFDs()[1], c.cut); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := sender.fe.TxRing(0).Add(vhosttest.Buf{Addr: buf, Len: uint32(len(msg))}); err != nil {
				t.Fatal(err)
			}
			sender.fe.Kick(1)
			brokenByFault(t, s, dest)
			brokenByFault(t, s, sender)
			// The frame the fault interrupted is received and dropped as
			// memory_fault, not lost from the ledger.
			waitFor(t, "the interrupted frame counted", func() bool { return portStats(s, "sender").Drops["memory_fault"] == 1 })
			balance(t, s)
			recovered(t, s, a, b, fds0, dest, sender)
		})
	}
}
