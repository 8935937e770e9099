package vswitch

import (
	"context"
	"log/slog"
	"sync/atomic"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// What a NIC port does about each thing that can happen to its interface,
// and why. All of it runs on the port's watcher.

// nicEvents counts what happened to a port's interface. They are in the
// port's kernel counters (`show stats`, the metrics) beside the XDP and
// AF_XDP ones.
type nicEvents struct {
	linkDown   atomic.Uint64 // the link went down: admin down or no carrier
	mtuChanges atomic.Uint64
}

const nicEventCount = 2

func (e *nicEvents) addTo(k map[string]uint64) {
	k["link_down_events"] = e.linkDown.Load()
	k["mtu_changes"] = e.mtuChanges.Load()
}

// check looks up the interface of the port's name and acts on what
// changed since the last look.
func (p *nicPort) check(ctx context.Context, sw *Switch) {
	l, err := netlink.LinkByName(p.spec.Ifname)
	if err != nil {
		slog.Debug("nic: cannot read the interface", "port", p.spec.Name, "err", err)
		return
	}
	if a := l.Attrs(); p.bound != nil && a.Index == p.bound.ifindex {
		p.followLink(a)
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
