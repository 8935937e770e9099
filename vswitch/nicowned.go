package vswitch

import (
	"errors"
	"log/slog"
	"time"

	"golang.org/x/sys/unix"

	"github.com/xvswitch/xvswitch/afpacket"
	"github.com/xvswitch/xvswitch/bpf"
	"github.com/xvswitch/xvswitch/xsk"
)

// zeroVerdicts: resocket retires AF_XDP socket statistics only; the
// program with its verdict counters, and the group socket, stay.
var zeroVerdicts bpf.Counters

// The NIC port's side of owned queues (owned.go): which queues it binds,
// handing its sockets to its queues, and rebuilding them when owners
// change.

// owned reports whether a VM owns queue q of the port's interface.
func (p *nicPort) owned(q int) bool {
	if p.owners == nil {
		return false
	}
	name, _ := p.owners.owner(p.spec.Ifname, q)
	return name != ""
}

// syncQueueOwners tells the XDP program which of the port's queues are
// owned and by which MAC: on those it redirects only the owner's unicast
// (bpf.SetQueueOwner), since their sockets are the owner's. Set before an
// owner's socket can be in the slot, cleared only after it left.
func (p *nicPort) syncQueueOwners(b *nicBinding) {
	if p.owners == nil {
		return
	}
	for q := range p.queues {
		var err error
		if name, mac := p.owners.owner(p.spec.Ifname, q); name != "" {
			err = b.steer.SetQueueOwner(uint32(q), macBytes(mac))
		} else {
			err = b.steer.ClearQueueOwner(uint32(q))
		}
		if err != nil {
			slog.Error("nic: telling the XDP program who owns a queue", "port", p.spec.Name, "queue", q, "err", err)
		}
	}
}

// attachSockets gives each queue its socket from b. A queue a VM owns has
// none here: frames the switch sends there leave through the first queue
// that has one (txVia), so traffic to the NIC never depends on which
// queue a worker's transmits land on.
func (p *nicPort) attachSockets(b *nicBinding) {
	var via *nicQueue
	for i, q := range p.queues {
		if b.socks[i] != nil {
			q.attach(b.socks[i])
			if via == nil {
				via = q
			}
		}
	}
	for i, q := range p.queues {
		if b.socks[i] == nil {
			q.txVia.Store(via)
		}
	}
}

// detachSockets takes b's sockets off the queues. Workers may still be in
// a burst on them until the next published snapshot.
func (p *nicPort) detachSockets(b *nicBinding) {
	for i, q := range p.queues {
		q.txVia.Store(nil)
		if i < len(b.socks) && b.socks[i] != nil {
			q.detach(b.socks[i])
		}
	}
}

// resocket rebinds the port's sockets after the owners of its queues
// changed: all of them, since a socket cannot leave its UMEM's
// registration (nicBinding.openSockets). The steering program and its
// maps stay. Meanwhile frames on the interface go to the kernel (counted
// as xdp_no_socket_passed) and frames to the port are port_down: the
// window is one snapshot publication and a bind per queue. Called with
// sw.mu held.
func (p *nicPort) resocket(sw *Switch) {
	b := p.bound
	if b == nil {
		return // gone: the next bind skips the owned queues by itself
	}
	p.syncQueueOwners(b)
	p.detachSockets(b)
	sw.publish()
	addKernelCounts(p.retired, zeroVerdicts, b.socketStats(), afpacket.Stats{})
	if err := b.closeSockets(); err != nil {
		slog.Warn("nic: closing sockets for owned queues", "port", p.spec.Name, "err", err)
	}
	if err := b.openSockets(p.spec, len(p.queues), p.owned, true); err != nil {
		p.events.recoveryErrors.Add(1)
		b.socks = make([]*xsk.Socket, len(p.queues))
		slog.Error("nic: binding sockets after a change of queue owners failed; frames to the port are port_down",
			"port", p.spec.Name, "ifname", p.spec.Ifname, "owned", p.owners.describe(p.spec.Ifname), "err", err)
		return
	}
	p.attachSockets(b)
	slog.Info("nic: sockets rebound for owned queues", "port", p.spec.Name, "ifname", p.spec.Ifname,
		"owned", p.owners.describe(p.spec.Ifname), "af_xdp", b.mode())
}

// queueFreeWait bounds how long bindQueue waits for a queue to come free.
const queueFreeWait = 2 * time.Second

// bindQueue binds a socket to (ifindex, queue), waiting while the queue
// is EBUSY for at most queueFreeWait: a socket closed a moment ago (the
// owner's, or the port's own before a rebind) lets go of its queue only
// when the kernel's deferred release of its buffer pool has run, after
// close returned. A queue still busy after that is someone else's.
func bindQueue(u *xsk.UMEM, ifindex, queue int, cfg xsk.SocketConfig) (*xsk.Socket, error) {
	deadline := time.Now().Add(queueFreeWait)
	for {
		s, err := u.Bind(ifindex, queue, cfg)
		if err == nil || !errors.Is(err, unix.EBUSY) || time.Now().After(deadline) {
			return s, err
		}
		time.Sleep(5 * time.Millisecond)
	}
}
