package vswitch

import (
	"bytes"
	"fmt"
	stdnet "net"
	"strings"
	"testing"
	"time"

	"github.com/xvswitch/xvswitch/ctl"
	"github.com/xvswitch/xvswitch/portspec"
	"github.com/xvswitch/xvswitch/vhost/vhosttest"
	"github.com/xvswitch/xvswitch/virtionet"
)

// allowSpoof makes the owner's port not enforce its source MAC: the
// zero-copy transmit path's condition.
func allowSpoof(s *portspec.Vhost) { s.AllowSpoof = true }

// innerMAC is the namespace end's MAC, as an FDB key.
func innerMAC(t *testing.T, l *ownedLab) uint64 {
	t.Helper()
	var mac uint64
	err := l.v.NS.Do(func() error {
		ifi, err := stdnet.InterfaceByName(l.v.Inner)
		if err != nil {
			return err
		}
		mac = MACKey(ifi.HardwareAddr)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return mac
}

// nicPath is the NIC port's path counters (what its queues transmitted).
func nicPath(l *ownedLab) ctl.PathCounters { return portStats(l.s, l.v.Outer).PathCounters }

// sendFromVM has the owner send frames (tagged by a marker in their
// payload) to the namespace with header h, and checks they all arrive
// there byte for byte.
func sendFromVM(t *testing.T, l *ownedLab, w *wire, h virtionet.Header, tag string, sizes ...int) {
	t.Helper()
	dst := innerMAC(t, l)
	want := map[string][]byte{}
	var frames [][]byte
	for i, n := range sizes {
		p := fmt.Sprintf("%s #%03d ", tag, i)
		f := ethFrame(dst, ownedVM, p+strings.Repeat("z", n-14-len(p)))
		want[p] = f
		frames = append(frames, f)
	}
	if got := l.g.fe.SendWithHeader(0, h, frames...); got != len(frames) {
		t.Fatalf("the guest's TX ring took %d of %d", got, len(frames))
	}
	for end := time.Now().Add(5 * time.Second); len(want) > 0 && time.Now().Before(end); {
		for _, f := range w.recv(20 * time.Millisecond) {
			if len(f) < 14+len(tag)+6 {
				continue
			}
			p := string(f[14 : 14+len(tag)+6])
			if exp, ok := want[p]; ok {
				// A checksum the switch completed changed two bytes.
				if h.Flags == 0 && !bytes.Equal(f, exp) || len(f) != len(exp) {
					t.Fatalf("frame %q arrived changed", p)
				}
				delete(want, p)
			}
		}
	}
	if len(want) > 0 {
		t.Fatalf("%d of %d %s frames never reached the namespace", len(want), len(frames), tag)
	}
}

// txDone waits until the guest got all n of its TX chains back as used
// and the TX queue holds none.
func txDone(t *testing.T, l *ownedLab, n int) {
	t.Helper()
	got := 0
	waitFor(t, fmt.Sprintf("%d TX chains used", n), func() bool {
		c, err := l.g.fe.TxRing(0).Reap()
		if err != nil {
			t.Fatal(err)
		}
		got += len(c)
		return got >= n
	})
	if got != n {
		t.Fatalf("%d TX chains used, want %d", got, n)
	}
	tx := l.s.byName["vmz"].drv.(*vhostPort).dev.TxQueue(0).Transmitter()
	if tx.Held() != 0 || tx.HeldLost() != 0 {
		t.Fatalf("TX queue holds %d chains, lost %d", tx.Held(), tx.HeldLost())
	}
}

// zcTxBound reports whether the owner's zero-copy transmit path is up.
func (l *ownedLab) zcTxBound() bool {
	o := l.s.byName["vmz"].drv.(*vhostPort).owner
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.ztx[1] != nil
}

// TestOwnedQueueTransmitZeroCopy: frames the owner sends to the namespace
// leave from its own memory on its socket: they arrive intact, the NIC
// port counts them zero-copy with nothing copied, each chain becomes used
// once its completion came back; chained frames and offload-flagged ones
// take the copy path (counted copied); the counters balance.
func TestOwnedQueueTransmitZeroCopy(t *testing.T) {
	for _, packed := range []bool{true, false} {
		t.Run(ringName(packed), func(t *testing.T) {
			l := newOwnedLabWith(t, vhosttest.Options{Packed: packed, Features: vhosttest.DefaultFeatures | 1<<virtionet.FeatureCsum}, allowSpoof)
			waitFor(t, "the owner's transmit path", l.zcTxBound)
			w := openWire(t, l.v)
			l.send(t, 2) // the namespace's MAC learned on the NIC port
			before := nicPath(l)
			sendFromVM(t, l, w, virtionet.Header{}, "zc", 60, 200, 1514, 61, 999)
			txDone(t, l, 5)
			p := nicPath(l)
			if p.ZerocopyFrames-before.ZerocopyFrames != 5 || p.CopiedFrames != before.CopiedFrames || p.CopiedBytes != before.CopiedBytes {
				t.Fatalf("NIC path counters %+v (before %+v): want 5 zero-copy, none copied", p, before)
			}

			// Offload requested (the guest negotiated CSUM): the switch
			// completes the checksum, so it copies.
			csum := virtionet.Header{Flags: virtionet.FlagNeedsCsum, CsumStart: 40, CsumOffset: 0}
			before = nicPath(l)
			sendFromVM(t, l, w, csum, "of", 100, 100)
			txDone(t, l, 2)
			if p := nicPath(l); p.ZerocopyFrames != before.ZerocopyFrames || p.CopiedFrames-before.CopiedFrames != 2 {
				t.Fatalf("offloaded frames: NIC path counters %+v (before %+v): want 2 copied", p, before)
			}
			balance(t, l.s)
		})
	}
}

// TestOwnedQueueTransmitChained: with 512-byte guest buffers a frame of
// 1000 bytes is a chain of two: copied; a 300-byte one still leaves from
// the guest's memory.
func TestOwnedQueueTransmitChained(t *testing.T) {
	l := newOwnedLabWith(t, vhosttest.Options{Packed: true, BufSize: 512}, allowSpoof)
	waitFor(t, "the owner's transmit path", l.zcTxBound)
	w := openWire(t, l.v)
	before := nicPath(l)
	sendFromVM(t, l, w, virtionet.Header{}, "ch", 1000, 300, 1000)
	txDone(t, l, 3)
	p := nicPath(l)
	if p.ZerocopyFrames-before.ZerocopyFrames != 1 || p.CopiedFrames-before.CopiedFrames != 2 || p.CopiedBytes-before.CopiedBytes != 2000 {
		t.Fatalf("NIC path counters %+v (before %+v): want 1 zero-copy, 2 copied (2000 bytes)", p, before)
	}
	balance(t, l.s)
}

// TestOwnedQueueTransmitSpoofEnforced: a port enforcing its source MAC
// (mac= without spoof=allow) gets no TX ring on its sockets and copies
// every frame it sends, although it still receives without a copy.
func TestOwnedQueueTransmitSpoofEnforced(t *testing.T) {
	l := newOwnedLab(t)
	waitFor(t, "the owner's sockets", func() bool { return l.ownerGen() != 0 })
	if l.zcTxBound() {
		t.Fatal("a spoof-enforcing port got the zero-copy transmit path")
	}
	w := openWire(t, l.v)
	before := nicPath(l)
	sendFromVM(t, l, w, virtionet.Header{}, "sp", 60, 500, 1514)
	txDone(t, l, 3)
	p := nicPath(l)
	if p.ZerocopyFrames != before.ZerocopyFrames || p.CopiedFrames-before.CopiedFrames != 3 {
		t.Fatalf("NIC path counters %+v (before %+v): want 3 copied", p, before)
	}
	balance(t, l.s)
}

// TestOwnedQueueTransmitHeldAtTeardown: chains held for completions that
// the worker has not reaped yet (reaping held back) when the memory table
// is replaced, or the TX ring stopped, go back to the guest as used: none
// lost, none left held, the counters balance.
func TestOwnedQueueTransmitHeldAtTeardown(t *testing.T) {
	for _, how := range []string{"memory-table", "ring-stop"} {
		t.Run(how, func(t *testing.T) {
			l := newOwnedLabWith(t, vhosttest.Options{Packed: true}, allowSpoof)
			waitFor(t, "the owner's transmit path", l.zcTxBound)
			w := openWire(t, l.v)
			zcTxReap.Store(false)
			t.Cleanup(func() { zcTxReap.Store(true) })
			gen := l.ownerGen()
			sendFromVM(t, l, w, virtionet.Header{}, "hd", 60, 70, 80, 90)
			tx := l.s.byName["vmz"].drv.(*vhostPort).dev.TxQueue(0).Transmitter()
			waitFor(t, "4 chains held", func() bool { return tx.Held() == 4 })
			if c, _ := l.g.fe.TxRing(0).Reap(); len(c) != 0 {
				t.Fatalf("%d held chains used before their completion", len(c))
			}
			switch how {
			case "memory-table":
				l.g.fe.SetMemTable()
			case "ring-stop":
				l.g.fe.Call(vhosttest.ReqGetVringBase, vhosttest.VringState(1, 0))
			}
			if how == "memory-table" {
				waitFor(t, "the sockets rebuilt", func() bool { g := l.ownerGen(); return g != 0 && g != gen })
			}
			zcTxReap.Store(true)
			if how == "memory-table" {
				txDone(t, l, 4)
			} else {
				// The stopped ring's chains were used before it stopped.
				waitFor(t, "no chain held", func() bool { return tx.Held() == 0 })
				if tx.HeldLost() != 0 {
					t.Fatalf("%d held chains lost", tx.HeldLost())
				}
				if c, _ := l.g.fe.TxRing(0).Reap(); len(c) != 4 {
					t.Fatalf("%d chains used at the ring's stop, want 4", len(c))
				}
			}
			if p := nicPath(l); p.ZerocopyFrames != 4 {
				t.Errorf("NIC path counters %+v: want the 4 zero-copy", p)
			}
			balance(t, l.s)
		})
	}
}

// TestZCTxAllocs: the zero-copy transmit path allocates nothing per
// burst (a fake socket-free check of transmit's and reap's bookkeeping is
// in xsk and virtionet; this one runs the real path on veth).
func TestZCTxAllocs(t *testing.T) {
	l := newOwnedLabWith(t, vhosttest.Options{Packed: true}, allowSpoof)
	waitFor(t, "the owner's transmit path", l.zcTxBound)
	o := l.s.byName["vmz"].drv.(*vhostPort).owner
	o.mu.Lock()
	z := o.ztx[1]
	o.mu.Unlock()
	q := l.nic.queues[0]
	var b Burst
	var c Counts
	a := testing.AllocsPerRun(100, func() {
		// Nothing of the burst qualifies (no TX burst in progress): the
		// checks, the lock and the return.
		z.transmit(q, &b, 0, &c)
		_ = z.reap(nil)
	})
	if a != 0 {
		t.Fatalf("%v allocations per burst", a)
	}
}
