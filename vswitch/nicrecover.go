package vswitch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// What a NIC port does about each thing that can happen to its interface,
// and why: docs/nic-faults.md. All of it runs on the port's watcher.

// nicEvents counts what happened to a port's interface. They are in the
// port's kernel counters (`show stats`, the metrics) beside the XDP and
// AF_XDP ones.
type nicEvents struct {
	linkDown       atomic.Uint64 // the link went down: admin down or no carrier
	gone           atomic.Uint64 // the interface went away: deleted, renamed or moved
	reattached     atomic.Uint64 // an interface of the name appeared and the port took it
	mtuChanges     atomic.Uint64
	xdpDetached    atomic.Uint64 // the port's program was no longer on the hook
	xdpReattached  atomic.Uint64 // ... and the port attached it again
	xdpReplaced    atomic.Uint64 // another program was on the hook
	recoveryErrors atomic.Uint64 // attaching again failed (it is tried again)
	// ownerDiscarded: frames left in an owning VM's socket on this NIC
	// when it closed (vmowned.go), never received by the switch.
	ownerDiscarded atomic.Uint64
}

const nicEventCount = 9

func (e *nicEvents) addTo(k map[string]uint64) {
	k["link_down_events"] = e.linkDown.Load()
	k["nic_gone_events"] = e.gone.Load()
	k["nic_reattached"] = e.reattached.Load()
	k["mtu_changes"] = e.mtuChanges.Load()
	k["xdp_detached_events"] = e.xdpDetached.Load()
	k["xdp_reattached"] = e.xdpReattached.Load()
	k["xdp_replaced_events"] = e.xdpReplaced.Load()
	k["recovery_errors"] = e.recoveryErrors.Load()
	k["owner_rx_discarded"] = e.ownerDiscarded.Load()
}

// check looks up the interface of the port's name and acts on what
// changed since the last look.
func (p *nicPort) check(ctx context.Context, sw *Switch) {
	l, err := netlink.LinkByName(p.spec.Ifname)
	var missing netlink.LinkNotFoundError
	if err != nil && !errors.As(err, &missing) {
		slog.Debug("nic: cannot read the interface", "port", p.spec.Name, "err", err)
		return
	}
	var a *netlink.LinkAttrs
	if err == nil {
		a = l.Attrs()
	}
	if p.bound != nil && (a == nil || a.Index != p.bound.ifindex) {
		if !lockSwitch(ctx, sw) {
			return
		}
		p.lose(sw, a != nil)
		sw.mu.Unlock()
	}
	switch {
	case a == nil:
	case p.bound == nil:
		if !lockSwitch(ctx, sw) {
			return
		}
		p.rebind(sw, a)
		sw.mu.Unlock()
	default:
		p.followLink(a)
		p.followXDP(a)
	}
}

// lose lets go of an interface that went away. The kernel has unbound its
// sockets (they would never carry a frame again) and detached the program,
// so the port closes them and removes the pins rather than keep them for
// an interface that may never return; frames to the port are port_down
// until an interface of its name appears. Called with sw.mu held.
func (p *nicPort) lose(sw *Switch, replaced bool) {
	b := p.bound
	p.link.up.Store(false)
	p.detachSockets(b)
	p.groups.detach(b.groups)
	// Once every worker forwards with a newer snapshot, none is in a
	// burst on the old sockets or UMEM.
	sw.publish()
	b.counters(p.retired)
	err := b.close()
	p.bound = nil
	p.foreign.Store(0)
	p.xdpLost = false
	p.events.gone.Add(1)
	slog.Warn("nic: interface gone; frames to the port are dropped as port_down until an interface of its name appears",
		"port", p.spec.Name, "ifname", p.spec.Ifname, "ifindex", b.ifindex, "another_in_its_place", replaced, "close_err", err)
}

// rebind attaches the port to an interface of its name that appeared, as
// add-port did (program and pins, host-address tracking, one socket per
// queue), and gives the new program the MACs behind the other ports.
// What cannot work yet is logged once and tried again at the next look.
// Called with sw.mu held.
func (p *nicPort) rebind(sw *Switch, a *netlink.LinkAttrs) {
	const what = "attach to the interface of its name"
	if n := nicQueueCount(a.Name); n < len(p.queues) {
		p.notYet(what, fmt.Sprintf("it has %d rx queues, the port %d", n, len(p.queues)))
		return
	}
	if a.Xdp != nil && a.Xdp.ProgId != 0 {
		p.notYet(what, fmt.Sprintf("another XDP program (id %d) holds it", a.Xdp.ProgId))
		return
	}
	b, err := bindNIC(p.spec, len(p.queues), p.owned)
	if err != nil {
		p.events.recoveryErrors.Add(1)
		p.notYet(what, err.Error())
		return
	}
	p.install(b)
	sw.syncMACs()
	sw.renewOwners(p.spec.Ifname) // their sockets were on the old interface
	p.lastWait = ""
	p.events.reattached.Add(1)
	slog.Info("nic: interface back; the port attached to it again", "port", p.spec.Name, "ifindex", b.ifindex, "detail", p.detail())
}

// notYet says why the port cannot do what yet, once per reason: it tries
// again at every look.
func (p *nicPort) notYet(what, why string) {
	if msg := what + ": " + why; msg != p.lastWait {
		slog.Warn("nic: the port cannot "+what+" yet; it tries again at every look", "port", p.spec.Name, "ifname", p.spec.Ifname, "why", why)
		p.lastWait = msg
	}
}

// followLink hands the data path the link's state and MTU. A link that is
// down keeps its sockets (the kernel keeps them bound, and they carry
// traffic again when it returns); frames to it are port_down. An MTU
// change needs no new sockets either: the kernel keeps them bound, and
// frames the new MTU no longer fits are too_long instead of being dropped
// by the kernel without a trace.
func (p *nicPort) followLink(a *netlink.LinkAttrs) {
	up := a.RawFlags&unix.IFF_UP != 0 && a.RawFlags&unix.IFF_RUNNING != 0
	if p.link.up.Swap(up) != up {
		if up {
			slog.Info("nic: link up", "port", p.spec.Name, "ifname", p.spec.Ifname)
		} else {
			p.events.linkDown.Add(1)
			slog.Warn("nic: link down; frames to the port are dropped as port_down until it returns",
				"port", p.spec.Name, "ifname", p.spec.Ifname, "admin_up", a.RawFlags&unix.IFF_UP != 0)
		}
	}
	if old := p.link.mtu.Swap(int32(a.MTU)); int(old) != a.MTU {
		p.events.mtuChanges.Add(1)
		slog.Info("nic: MTU changed; longer frames are dropped as too_long", "port", p.spec.Name, "ifname", p.spec.Ifname, "old", old, "mtu", a.MTU)
	}
}

// followXDP checks the hook still runs the port's program. Detached (only
// `bpftool link detach` can: netlink may not replace a BPF link): the
// port attaches it again, with the maps it never lost. Another program in
// its place: the port leaves it, since whoever attached it meant to and
// taking the hook back would fight them; it says so and is degraded until
// that program goes, then attaches its own again.
func (p *nicPort) followXDP(a *netlink.LinkAttrs) {
	var id uint32
	if a.Xdp != nil {
		id = a.Xdp.ProgId
	}
	steer := p.bound.steer
	if id == steer.ProgramID() {
		// Ours, attached by hand (bpftool net attach of the pinned program).
		p.xdpLost = false
		p.foreign.Store(0)
		return
	}
	if !p.xdpLost {
		p.xdpLost = true
		p.events.xdpDetached.Add(1)
		slog.Warn("nic: the port's XDP program is no longer on the interface", "port", p.spec.Name, "ifname", p.spec.Ifname, "prog_id", steer.ProgramID())
	}
	if id != 0 {
		if p.foreign.Swap(id) != id {
			p.events.xdpReplaced.Add(1)
			slog.Warn("nic: another XDP program holds the interface; the port leaves it there and is degraded until it is removed: frames go where that program sends them",
				"port", p.spec.Name, "ifname", p.spec.Ifname, "other_prog_id", id)
		}
		return
	}
	p.foreign.Store(0)
	if err := steer.Reattach(); err != nil {
		p.events.recoveryErrors.Add(1)
		p.notYet("attach its XDP program again", err.Error())
		return
	}
	p.xdpLost = false
	p.lastWait = ""
	p.events.xdpReattached.Add(1)
	slog.Info("nic: XDP program attached again", "port", p.spec.Name, "ifname", p.spec.Ifname, "prog_id", steer.ProgramID())
}
