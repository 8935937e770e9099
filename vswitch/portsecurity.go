package vswitch

import "github.com/xvswitch/xvswitch/portspec"

// Port security: what a port may do to the learning bridge. A hostile
// guest can send from any source MAC it likes; these bound what that
// costs everyone else.

const (
	// DefaultMaxMACs is how many learned MACs a VM port (or a port of a
	// kind the switch does not build) may hold in the FDB at once, unless
	// its spec says maxmacs=. A VM has one MAC, a few more if it runs
	// containers on macvlan or a small nested bridge; 64 covers that, and
	// it takes 64 such ports, all hostile, to fill the 4096-entry table.
	DefaultMaxMACs = 64
	// DefaultNICMaxMACs is the same for a NIC port. A NIC faces a whole
	// network, whose hosts are learned from their broadcasts and their
	// frames to the VMs, so it may take half the table: a flood of
	// source MACs from the wire still leaves the other half to the VMs.
	DefaultNICMaxMACs = portspec.FDBSize / 2
)

// security is a port's limits, fixed when it is added.
type security struct {
	// mac is the port's configured MAC (a static FDB entry), 0 if none.
	mac uint64
	// maxMACs is how many learned MACs the port may hold at once.
	maxMACs int
	// ownSource drops, as DropSpoofed, every frame whose source MAC is
	// not mac (OVS port security, Hyper-V's MAC spoofing off). Only with
	// a mac.
	ownSource bool
	// vlans are the VLANs it sends and receives in (vlan=, trunk=).
	vlans portspec.VLANs
}

// srcCheck is the mask that forward applies to (source ^ mac): all 48
// bits when only mac may be a source, none otherwise. One XOR, AND and
// compare per frame, on a key forward computes anyway for learning.
func (sec security) srcCheck() uint64 {
	if sec.ownSource && sec.mac != 0 {
		return macMask
	}
	return 0
}

// orDefault is n, or def when a spec left it 0.
func orDefault(n, def int) int {
	if n == 0 {
		return def
	}
	return n
}
