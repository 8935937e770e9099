package vswitch

import (
	"log/slog"
	"net"
	"slices"
	"time"

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
//
// The frame goes through a worker, as an ingress queue of the guest's
// port that worker 0 polls for as long as it takes (Switch.announcing,
// in every snapshot built meanwhile), not through a forwarder of the
// control path's own: a worker that alone polls anything transmits
// without egress locks (snapshot.solo), so another goroutine transmitting
// beside it would write a guest's receive ring under it. Polled by worker
// 0, the queue makes it the solo worker or none, and publish's hand-over
// covers the change.

// announceWait bounds how long the announcing queue stays in the
// snapshots when no worker takes its frame (workers not running).
const announceWait = 2 * time.Second

// announceQueue is an ingress queue that yields one frame, once, and
// closes taken when it has. Only worker 0 polls it (sent is its own).
type announceQueue struct {
	frame []byte
	sent  bool
	taken chan struct{}
}

func (q *announceQueue) Receive(b *Burst, _ *Counts) (int, error) {
	if q.sent {
		return 0, nil
	}
	q.sent = true
	b.SetOne(0, q.frame)
	close(q.taken)
	return 1, nil
}

func (q *announceQueue) Release(*Burst) error { return nil }
func (q *announceQueue) Waker() Waker         { return Waker{FD: -1} }

// announce sends the RARP of mac from port name (a vhost port whose
// front-end sent SEND_RARP). It returns at once: a goroutine puts the
// frame's queue into the snapshots, waits for worker 0 to take the frame
// and takes the queue out again.
func (s *Switch) announce(name string, mac net.HardwareAddr) {
	frame := vhost.RARPFrame(mac)
	q := &announceQueue{frame: frame[:], taken: make(chan struct{})}
	go func() {
		s.mu.Lock()
		src := s.byName[name]
		if src == nil || len(src.stats) == 0 {
			s.mu.Unlock()
			return // deleted meanwhile
		}
		in := &ingress{port: src, q: q, stats: &src.stats[0]}
		s.announcing = append(s.announcing, in)
		s.publish()
		s.mu.Unlock()

		taken := false
		select {
		case <-q.taken:
			taken = true
		case <-time.After(announceWait):
		}
		s.mu.Lock()
		s.announcing = slices.DeleteFunc(s.announcing, func(x *ingress) bool { return x == in })
		s.publish()
		s.mu.Unlock()
		if !taken {
			slog.Warn("announce: RARP not sent: no worker took it", "port", name, "mac", mac.String(), "waited", announceWait)
			return
		}
		slog.Info("announced a migrated guest: RARP sent from its MAC", "port", name, "mac", mac.String())
	}()
}
