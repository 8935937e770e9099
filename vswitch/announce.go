package vswitch

import (
	"log/slog"
	"net"
	"runtime"
	"runtime/debug"

	"github.com/xvswitch/xvswitch/vhost"
)

// After a live migration the guest runs behind another port, and the
// network must learn it (docs/vms.md, "Live migration"). A guest that
// negotiated VIRTIO_NET_F_GUEST_ANNOUNCE announces itself (QEMU asks it
// to; Linux sends gratuitous ARP and neighbour advertisements), and the
// switch learns from those frames like from any other. For a guest that
// did not, the destination QEMU sends SEND_RARP with the guest's MAC, and
// the switch does what QEMU would do on a tap device: it sends a
// broadcast RARP from that MAC as if the guest had sent it. The frame
// goes through forward like a guest's own: the FDB learns the MAC on the
// guest's new port (moving it from the old one), the frame floods every
// other port of the bridge so that the switches behind the NICs learn it
// too, port security applies (a port whose mac= differs drops it as
// spoofed), and it is counted as one frame received from the guest's
// port, so the counters balance as for any flood.

// announceQueue is an ingress queue that yields one frame, once.
type announceQueue struct {
	frame []byte
	done  bool
}

func (q *announceQueue) Receive(b *Burst, _ *Counts) (int, error) {
	if q.done {
		return 0, nil
	}
	q.done = true
	b.SetOne(0, q.frame)
	return 1, nil
}

func (q *announceQueue) Release(*Burst) error { return nil }
func (q *announceQueue) Waker() Waker         { return Waker{FD: -1} }

// announce sends the RARP of mac from port name (a vhost port whose
// front-end sent SEND_RARP). It returns at once; the frame is forwarded on
// a goroutine of its own, which handles a fault on a guest's memory as a
// worker does (the frame is copied into the other guests' buffers), and
// done, if set, is called after.
func (s *Switch) announce(name string, mac net.HardwareAddr, done func()) {
	frame := vhost.RARPFrame(mac)
	go func() {
		if done != nil {
			defer done()
		}
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		debug.SetPanicOnFault(true)
		snap := s.snap.Load()
		var src *port
		for _, p := range snap.ports {
			if p != nil && p.name == name {
				src = p
			}
		}
		if src == nil || len(src.stats) == 0 {
			return // deleted meanwhile
		}
		w := &worker{forwarder: forwarder{fdb: s.fdb, taps: &s.caps.table}, sw: s}
		in := &ingress{port: src, q: &announceQueue{frame: frame[:]}, stats: &src.stats[0]}
		if _, err := w.forwardSafe(snap, in); err != nil {
			slog.Warn("announce: RARP not sent", "port", name, "mac", mac.String(), "err", err)
			return
		}
		slog.Info("announced a migrated guest: RARP sent from its MAC", "port", name, "mac", mac.String())
	}()
}
