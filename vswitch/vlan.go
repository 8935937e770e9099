package vswitch

import (
	"github.com/xvswitch/xvswitch/bpf"
	"github.com/xvswitch/xvswitch/portspec"
)

// VLANs (docs/vlans.md): a port's 802.1Q settings, as the forwarder reads
// them. Inside the switch every frame is in one VLAN (the FDB's keys,
// flooding, the ports it may leave on); on the port's side it is tagged
// or not as the port's settings say, and the worker pushes or pops the
// tag on the copy each output port makes (vlantag.go).
//
// While no port of the switch has VLAN settings the forwarder does none
// of this (snapshot.vlans is false): frames pass with the bytes they came
// with and are switched in VLAN 0, as before VLANs existed.

const (
	tpid8021Q  = 0x8100
	vlanTagLen = 4
	// noNative is portVLAN.native for a trunk without a native VLAN: no
	// VLAN leaves it untagged, and untagged frames are not accepted.
	noNative = -1
	// accepted is classify's drop for a frame the port accepts.
	accepted = NumDrops
)

// portVLAN is a port's VLAN settings, fixed when the port is added.
type portVLAN struct {
	// native is the VLAN of the port's untagged frames (vlan=N; 0 on a
	// port without settings), noNative if it has none.
	native int32
	// access: vlan=N alone; tagged frames arriving are dropped
	// (DropVLANTagged) rather than checked against the members.
	access bool
	// members are the VLANs the port carries, one bit per id.
	members [4096 / 64]uint64
	spec    portspec.VLANs
}

// newPortVLAN builds the forwarder's view of settings v. A port without
// settings carries every VLAN, untagged ones in VLAN 0 (OVS's default).
func newPortVLAN(v portspec.VLANs) *portVLAN {
	p := &portVLAN{spec: v}
	switch {
	case !v.IsSet():
		for id := 0; id <= portspec.MaxVLAN; id++ {
			p.add(uint16(id))
		}
	case len(v.Trunks) == 0:
		p.native, p.access = int32(v.Tag), true
		p.add(uint16(v.Tag))
	default:
		p.native = noNative
		if v.Tag != 0 {
			p.native = int32(v.Tag)
			p.add(uint16(v.Tag))
		}
		for _, id := range v.Trunks {
			p.add(uint16(id))
		}
	}
	return p
}

// nativeVLAN is the VLAN of a NIC's untagged frames for its XDP
// program's MAC lookups (bpf.Policy.NativeVLAN): as newPortVLAN has it.
func nativeVLAN(v portspec.VLANs) uint16 {
	if n := newPortVLAN(v).native; n != noNative {
		return uint16(n)
	}
	return bpf.NoVLAN
}

func (p *portVLAN) add(id uint16) { p.members[id>>6] |= 1 << (id & 63) }

// carries is whether frames of VLAN id may enter or leave the port.
func (p *portVLAN) carries(id uint16) bool { return p.members[id>>6&63]&(1<<(id&63)) != 0 }

// tagged is whether frames of VLAN id leave the port tagged.
func (p *portVLAN) tagged(id uint16) bool { return int32(id) != p.native }

// staticVLANs are the VLANs a port's configured MAC (mac=) is pinned in:
// its native VLAN, and each VLAN of its trunk.
func (p *portVLAN) staticVLANs() []uint16 {
	var out []uint16
	if p.native >= 0 {
		out = append(out, uint16(p.native))
	}
	for _, id := range p.spec.Trunks {
		if int32(id) != p.native {
			out = append(out, uint16(id))
		}
	}
	return out
}

// classify finds the VLAN of a frame arriving on the port from its first
// bytes h (at least ethHeaderLen; tagged frames need ethHeaderLen +
// vlanTagLen, which the caller read when h[12:14] is the 802.1Q TPID).
// tag is whether the frame's bytes carry a tag, and exact whether that
// tag's id is the frame's VLAN (a priority tag, id 0, is not: the frame is
// in the native VLAN). drop is why the port does not accept it, or
// accepted.
func (p *portVLAN) classify(h []byte) (vid uint16, tag, exact bool, drop Drop) {
	if len(h) < ethHeaderLen+vlanTagLen || uint16(h[12])<<8|uint16(h[13]) != tpid8021Q {
		if p.native == noNative {
			return 0, false, false, DropVLANUntagged
		}
		return uint16(p.native), false, false, accepted
	}
	id := (uint16(h[14])<<8 | uint16(h[15])) & 0xfff
	if id == 0 { // priority tag: untagged as far as VLANs go
		if p.native == noNative {
			return 0, true, false, DropVLANUntagged
		}
		return uint16(p.native), true, false, accepted
	}
	if p.access {
		return 0, true, false, DropVLANTagged
	}
	if !p.carries(id) {
		return 0, true, false, DropVLANNotTrunked
	}
	return id, true, true, accepted
}
