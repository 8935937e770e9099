package bpf

import "fmt"

// Mode says which frames of an interface the switch owns (and the program
// therefore steers to the AF_XDP sockets). The values are the C enum
// xvs_mode's.
type Mode uint32

const (
	// ModeNone steers nothing: every frame goes to the kernel.
	ModeNone Mode = Mode(steerXvsModeXVS_MODE_NONE)
	// ModeAll steers every frame (the NIC belongs to the switch).
	ModeAll Mode = Mode(steerXvsModeXVS_MODE_ALL)
	// ModeMAC steers frames whose destination MAC is in the MAC map (the
	// VMs'), plus broadcast and multicast if the Policy says so.
	ModeMAC Mode = Mode(steerXvsModeXVS_MODE_MAC)
)

func (m Mode) String() string {
	switch m {
	case ModeNone:
		return "none"
	case ModeAll:
		return "all"
	case ModeMAC:
		return "mac"
	}
	return fmt.Sprintf("Mode(%d)", uint32(m))
}

// Policy is one interface's steering policy (entry 0 of the `config` map).
//
// Broadcast and multicast frames go either to the sockets or to the
// kernel, never both (XDP cannot clone into an XSKMAP); in ModeMAC those
// not steered are counted as GroupPassed. In ModeMAC, ARP and IPv6
// Neighbor Solicitations for the host's own addresses (SetHostAddrs,
// TrackHostAddrs) still go to the kernel, so the host stays reachable on
// the NIC; other group traffic the host may want (Router Advertisements,
// DHCP replies, multicast groups it joined) does not: see README.md.
type Policy struct {
	Mode Mode
	// Broadcast, in ModeMAC, steers frames to ff:ff:ff:ff:ff:ff.
	Broadcast bool
	// Multicast, in ModeMAC, steers frames to other group addresses
	// (I/G bit set), e.g. 01:00:5e:... and 33:33:....
	Multicast bool
	// NativeVLAN, in ModeMAC, is the VLAN untagged frames are looked up
	// in (AddVLANMAC): 0 for a NIC without VLAN settings, NoVLAN for a
	// trunk without a native VLAN (untagged frames are never steered).
	NativeVLAN uint16
}

// NoVLAN is Policy.NativeVLAN for a NIC whose untagged frames are in no
// VLAN: no MAC of the map matches them.
const NoVLAN = 0xffff

func (p Policy) String() string {
	return fmt.Sprintf("mode=%s broadcast=%t multicast=%t", p.Mode, p.Broadcast, p.Multicast)
}

func (p Policy) validate() error {
	switch p.Mode {
	case ModeNone, ModeAll, ModeMAC:
		return nil
	}
	return fmt.Errorf("%w: unknown mode %d", ErrPolicy, uint32(p.Mode))
}

func (p Policy) toC() steerXvsConfig {
	c := steerXvsConfig{Mode: steerXvsMode(p.Mode), NativeVlan: p.NativeVLAN}
	if p.Broadcast {
		c.Broadcast = 1
	}
	if p.Multicast {
		c.Multicast = 1
	}
	return c
}

func policyFromC(c steerXvsConfig) Policy {
	return Policy{Mode: Mode(c.Mode), Broadcast: c.Broadcast != 0, Multicast: c.Multicast != 0, NativeVLAN: c.NativeVlan}
}
