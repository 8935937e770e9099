package main

import (
	"strconv"
	"strings"
	"time"

	"github.com/xvswitch/xvswitch/ctl"
	"github.com/xvswitch/xvswitch/test/netns"
)

// This file sets up xvswitch's zero-copy system of scenarios 4 and 5
// (docs/zerocopy.md): the guest's vhost port owns a queue of the veth,
// whose socket has a UMEM over the guest's memory, so the frames that
// arrive on that queue for the guest's MAC are written by the kernel
// into the guest's own RX buffers.
//
// Which queue the generator's frames arrive on: a veth frame arrives on
// the peer's rx queue of the skb's queue mapping. The generator (an
// xvswitch in the namespace, AF_XDP copy-mode TX on the inner end) sends
// through __dev_direct_xmit, which sets the queue mapping to its socket's
// queue and calls the driver directly: tc egress, and so the tcx steering
// program of netns.Veth.SteerQueues, never sees those frames. Its one
// worker transmits on queue 0 (worker id mod queues), so every generated
// frame arrives on the outer end's queue 0, and that is the queue the VM
// owns. The steering program is attached all the same, mapping the
// guest's MAC to the owned queue and everything else to the other, for
// what the namespace's kernel itself sends (which goes through tc); the
// path counters of every run say where its frames went.

// ownedQueue is the veth queue the zero-copy system's VM owns.
const ownedQueue = 0

// otherQueue is the queue the NIC port keeps (its copy path).
const otherQueue = 1

// steerWire steers the namespace's kernel-sent frames: the guest's MAC
// onto the owned queue, the rest onto the NIC port's own.
func steerWire(t *runT, v *netns.Veth) {
	v.SteerQueues(t, map[string]int{guestMAC0: ownedQueue}, otherQueue)
}

// guestVhostSpec is the guest's --vhost port on system sys: for the
// zero-copy system it owns the veth's queue (own= needs mac=), and does
// not enforce its source MAC (spoof=allow): a port that does transmits
// through the copy path only, since the guest could rewrite a frame's
// source after the check while it waits in guest memory for the kernel.
func guestVhostSpec(sys, sock string, v *netns.Veth) string {
	spec := sock + ",name=vu0,mac=" + guestMAC0
	if sys == sysXvswitchZerocopy {
		spec += ",own=" + v.Outer + ":" + strconv.Itoa(ownedQueue) + ",spoof=allow"
	}
	return spec
}

// waitOwnSockets waits until the owner's sockets are bound on its
// memory (show ports: own_sockets=bound): before that its queue has no
// socket and frames take no path through the switch at all.
func waitOwnSockets(t *runT, d *xvsDaemon) {
	deadline := time.Now().Add(15 * time.Second)
	var detail string
	for time.Now().Before(deadline) {
		resp, err := ctl.Call(d.ctl, ctl.Request{Op: ctl.OpShowPorts})
		if err == nil {
			for _, p := range resp.Ports {
				if p.Name == "vu0" {
					detail = p.Detail
				}
			}
			if strings.Contains(detail, "own_sockets=bound") {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("the guest's port did not bind its own sockets: %q\n%s", detail, tail(d.log, 20))
}

// PortPath is one port's counters that say which path its frames took:
// the switch's path counters (ctl.PathCounters: frames sent without a
// copy by the switch, frames and bytes it copied), its queues' rx and tx
// (which NIC queue frames arrived on) and the bursts that carried them
// (frames per burst: who set the pace), and the kernel's counters of the
// port (a NIC's XDP verdicts and AF_XDP socket statistics).
type PortPath struct {
	ctl.PathCounters
	RxQueues []uint64          `json:"rx_packets_by_queue,omitempty"`
	TxQueues []uint64          `json:"tx_packets_by_queue,omitempty"`
	RxBursts []uint64          `json:"rx_bursts_by_queue,omitempty"`
	TxBursts []uint64          `json:"tx_bursts_by_queue,omitempty"`
	Kernel   map[string]uint64 `json:"kernel,omitempty"`
}

// Paths are every port's PortPath, by port name.
type Paths map[string]PortPath

// paths reads xvswitch's path counters.
func (d *xvsDaemon) paths() (Paths, error) {
	st, err := d.stats()
	if err != nil {
		return nil, err
	}
	out := Paths{}
	for _, p := range st {
		pp := PortPath{PathCounters: p.PathCounters, Kernel: p.Kernel}
		for _, q := range p.Queues {
			pp.RxQueues = append(pp.RxQueues, q.RxPackets)
			pp.TxQueues = append(pp.TxQueues, q.TxPackets)
			pp.RxBursts = append(pp.RxBursts, q.RxBursts)
			pp.TxBursts = append(pp.TxBursts, q.TxBursts)
		}
		out[p.Name] = pp
	}
	return out, nil
}

// since is the counters' increase from before to p (a counter lower than
// before was reset and counts from zero); kernel counters that did not
// move are left out.
func (p Paths) since(before Paths) Paths {
	out := Paths{}
	for name, e := range p {
		b := before[name]
		w := PortPath{PathCounters: ctl.PathCounters{
			ZerocopyFrames: delta(e.ZerocopyFrames, b.ZerocopyFrames),
			CopiedFrames:   delta(e.CopiedFrames, b.CopiedFrames),
			CopiedBytes:    delta(e.CopiedBytes, b.CopiedBytes),
			StreamedFrames: delta(e.StreamedFrames, b.StreamedFrames),
		}}
		w.RxQueues = deltas(e.RxQueues, b.RxQueues)
		w.TxQueues = deltas(e.TxQueues, b.TxQueues)
		w.RxBursts = deltas(e.RxBursts, b.RxBursts)
		w.TxBursts = deltas(e.TxBursts, b.TxBursts)
		for k, v := range e.Kernel {
			if n := delta(v, b.Kernel[k]); n > 0 {
				if w.Kernel == nil {
					w.Kernel = map[string]uint64{}
				}
				w.Kernel[k] = n
			}
		}
		out[name] = w
	}
	return out
}

func delta(now, before uint64) uint64 {
	if now < before {
		return now
	}
	return now - before
}

func deltas(now, before []uint64) []uint64 {
	var out []uint64
	for i, v := range now {
		var b uint64
		if i < len(before) {
			b = before[i]
		}
		out = append(out, delta(v, b))
	}
	return out
}
