package vhost_test

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/xvswitch/xvswitch/vhost"
	"github.com/xvswitch/xvswitch/vhost/vhosttest"
	"github.com/xvswitch/xvswitch/virtionet"
)

// TestBackEndRestart: a device moves frames both ways over rings small
// enough to wrap several times, then its connection goes away without
// GET_VRING_BASE, as when the back-end process dies, and a new device gets
// what QEMU sends a replacement (vhosttest.QEMUBase): for a split ring the
// used index in guest memory, for a packed ring the stale state of the
// first setup. The new device must go on exactly where the old one
// stopped: the guest's next TX frames come out in sequence, the three it
// sent before the restart first, and every RX frame reaches the guest once,
// in order. TX frames take chains of one to three descriptors (256-byte
// buffers) and RX frames as many merged buffers, so positions do not
// advance one slot per frame.
func TestBackEndRestart(t *testing.T) {
	t.Run("packed", func(t *testing.T) { backEndRestart(t, true) })
	t.Run("split", func(t *testing.T) { backEndRestart(t, false) })
}

func backEndRestart(t *testing.T, packed bool) {
	opts := vhosttest.Options{Packed: packed, RingSize: 16, BufSize: 256}
	d1, _, _ := newDevice(t, vhost.Config{})
	f := vhosttest.Connect(t, d1)
	f.Start(opts)
	vhosttest.WaitFor(t, "device ready", func() bool { return d1.Info().Ready })
	s := &testSession{d: d1, f: f}
	c := &seqCheck{t: t}

	c.both(s, 0, 42)
	// Sent by the guest, never popped by the old device.
	s.guestSend(t, seqFrame(42), seqFrame(43), seqFrame(44))
	if h := rxHeld(s.d); h != 0 {
		t.Fatalf("the old device holds %d RX buffers: the hang-up would return them", h)
	}

	d2, _, _ := newDevice(t, vhost.Config{})
	f.RestartBackEnd(d2, vhosttest.QEMUBase)
	s.d = d2
	vhosttest.WaitFor(t, "restarted device ready", func() bool { return d2.Info().Ready })
	if packed {
		// The guest may have missed the dead back-end's last interrupt:
		// the new one gives one on each resumed ring.
		for i := 0; i < 2; i++ {
			if f.WaitCall(i, time.Second) == 0 {
				t.Errorf("vring %d: no interrupt after resuming", i)
			}
		}
	}
	c.receive(s, 42, 45)
	c.deliver(s, [][]byte{seqFrame(42), seqFrame(43), seqFrame(44)})
	c.both(s, 45, 90)
}

// TestBackEndRestartFrontEndDrops: the back-end dies with frames pending
// on the guest's packed TX ring, and QEMU, serving the ring itself
// meanwhile with the link down, drops those from its stale position (the
// ring's start) on, then sends the new back-end its position after them
// (vhosttest.QEMUDroppedTX). The new back-end must drop the pending frames
// before QEMU's run too and interrupt the guest: the guest gets all four
// buffers back, and its next frames come out in sequence for laps. Before
// it did, the guest waited at the first pending frame for good and its TX
// ring filled up (CI's restart test, once).
func TestBackEndRestartFrontEndDrops(t *testing.T) {
	d1, _, _ := newDevice(t, vhost.Config{})
	f := vhosttest.Connect(t, d1)
	f.Start(vhosttest.Options{Packed: true, RingSize: 16, BufSize: 256})
	vhosttest.WaitFor(t, "device ready", func() bool { return d1.Info().Ready })
	s := &testSession{d: d1, f: f}
	c := &seqCheck{t: t}
	c.both(s, 0, 30)
	// Frames of one descriptor until the guest's next TX slot is 14 in a
	// lap of wrap counter 0: QEMU's stale position, slot 0 of lap 1, is
	// then the third of the four frames it queues next.
	n := 30
	for {
		if idx, wrap := s.tx().Packed().NextAvail(); idx == 14 && !wrap {
			break
		}
		if n > 70 {
			t.Fatal("the guest's TX ring never reached slot 14 of lap 0")
		}
		s.guestSend(t, smallSeqFrame(n))
		c.receive(s, n, n+1)
		n++
	}
	s.guestSend(t, smallSeqFrame(n), smallSeqFrame(n+1), smallSeqFrame(n+2), smallSeqFrame(n+3))

	d2, _, _ := newDevice(t, vhost.Config{})
	f.RestartBackEnd(d2, vhosttest.QEMUDroppedTX)
	s.d = d2
	vhosttest.WaitFor(t, "restarted device ready", func() bool { return d2.Info().Ready })
	if f.WaitCall(1, time.Second) == 0 {
		t.Error("no interrupt on the TX ring after resuming")
	}
	done, err := s.tx().Reap()
	if err != nil || len(done) != 4 {
		t.Fatalf("the guest got %d of the 4 pending TX buffers back (%v)", len(done), err)
	}
	c.rxNext = n + 4 // the frames in between went only one way
	c.both(s, n+4, n+4+45)
	// The two frames before QEMU's run (slots 14 and 15) were dropped by
	// the new device, and counted: in = out + dropped on its queue.
	if st := d2.TxQueue(0).Stats(); st.Drops[virtionet.DropResumeDropped] != 2 || st.Dropped() != 2 || st.Packets != 45 {
		t.Fatalf("restarted device's TX counters %+v: want 45 frames and 2 resume_dropped", st)
	}
}

// smallSeqFrame is frame n of a stream in one buffer of 256 with its
// header.
func smallSeqFrame(n int) []byte {
	b := frame(100, byte(n))
	binary.BigEndian.PutUint32(b[14:], uint32(n))
	return b
}

// seqCheck follows two sequence-numbered streams through a device: guest
// TX to device, and device to guest RX.
type seqCheck struct {
	t      *testing.T
	rxNext int // the next sequence number the guest must receive
}

// seqFrame is frame n of a stream: 100, 400 or 600 bytes (1, 2 or 3
// buffers of 256 with the header), n in bytes 14-17.
func seqFrame(n int) []byte {
	b := frame([]int{100, 400, 600}[n%3], byte(n))
	binary.BigEndian.PutUint32(b[14:], uint32(n))
	return b
}

func seqOf(b []byte) int {
	if len(b) < 18 {
		return -1
	}
	return int(binary.BigEndian.Uint32(b[14:]))
}

// both runs frames [from, to) through both directions, three at a time.
func (c *seqCheck) both(s *testSession, from, to int) {
	c.t.Helper()
	for n := from; n < to; n += 3 {
		m := min(n+3, to)
		var fs [][]byte
		for i := n; i < m; i++ {
			fs = append(fs, seqFrame(i))
		}
		s.guestSend(c.t, fs...)
		c.receive(s, n, m)
		c.deliver(s, fs)
	}
}

// receive pops the guest's TX frames and wants exactly [from, to).
func (c *seqCheck) receive(s *testSession, from, to int) {
	c.t.Helper()
	var got []int
	for tries := 0; len(got) < to-from && tries < 4; tries++ {
		for _, b := range s.deviceReceive(c.t) {
			got = append(got, seqOf(b))
		}
	}
	for i, n := range got {
		if i >= to-from || n != from+i {
			c.t.Fatalf("TX: device got frames %v, want %d..%d", got, from, to-1)
		}
	}
	if len(got) != to-from {
		c.t.Fatalf("TX: device got frames %v, want %d..%d", got, from, to-1)
	}
	if _, err := s.tx().Reap(); err != nil {
		c.t.Fatalf("TX: guest reap: %v", err)
	}
}

// deliver posts exactly the RX buffers fs need, delivers fs and wants the
// guest to receive them, next in its sequence, intact.
func (c *seqCheck) deliver(s *testSession, fs [][]byte) {
	c.t.Helper()
	bufs := 0
	for _, fr := range fs {
		bufs += (12 + len(fr) + 255) / 256
	}
	s.f.PostRx(0, bufs)
	if n := s.deviceDeliver(c.t, fs...); n != len(fs) {
		c.t.Fatalf("RX: delivered %d of %d frames", n, len(fs))
	}
	rs := s.f.Receive(0)
	for _, r := range rs {
		if n := seqOf(r.Frame); n != c.rxNext || len(r.Frame) != len(seqFrame(n)) {
			c.t.Fatalf("RX: guest received frame %d (%d bytes), want %d", n, len(r.Frame), c.rxNext)
		}
		c.rxNext++
	}
	if len(rs) != len(fs) {
		c.t.Fatalf("RX: guest received %d of %d frames", len(rs), len(fs))
	}
}

// rxHeld is how many RX buffers the device holds over between bursts.
func rxHeld(d *vhost.Device) int {
	q := d.RxQueue(0)
	a := q.Begin()
	if a == nil {
		return 0
	}
	defer q.End()
	return a.Rx.Held()
}
