package bpf

import (
	"encoding/binary"
	"testing"

	"github.com/cilium/ebpf"
)

// tagFrame is frameTo(dst) with an 802.1Q tag of tci after its MACs.
func tagFrame(dst string, tci uint16) []byte {
	f := frameTo(dst)
	out := append([]byte(nil), f[:12]...)
	out = binary.BigEndian.AppendUint16(out, 0x8100)
	out = binary.BigEndian.AppendUint16(out, tci)
	return append(out, f[12:]...)
}

// TestProgramVLANVerdicts: `macs` is keyed by (VLAN, MAC). A MAC in VLAN
// 10 is steered when tagged 10 (any priority), not in VLAN 20; untagged
// and priority-tagged frames are in the native VLAN, and a NIC with
// NoVLAN steers none of them.
func TestProgramVLANVerdicts(t *testing.T) {
	o := loaded(t)
	for _, vlan := range []uint16{10, 0} {
		k, err := macVLANKey(mustMAC(vmMAC), vlan)
		if err != nil {
			t.Fatal(err)
		}
		if vlan == 0 {
			k, _ = macVLANKey(mustMAC(otherMAC), 0)
		}
		if err := o.Macs.Update(&k, &steerXvsMacOwner{Port: 1}, ebpf.UpdateAny); err != nil {
			t.Fatal(err)
		}
	}
	steered, passed := Counters{NoSocketPassed: 1}, Counters{NotOwnedPassed: 1}
	for _, tc := range []struct {
		native uint16
		frame  []byte
		want   Counters
	}{
		{0, tagFrame(vmMAC, 10), steered},
		{0, tagFrame(vmMAC, 5<<13|10), steered}, // priority bits are not the VLAN
		{0, tagFrame(vmMAC, 20), passed},
		{0, frameTo(vmMAC), passed},           // untagged: native VLAN 0
		{10, frameTo(vmMAC), steered},         // untagged: native VLAN 10
		{10, tagFrame(vmMAC, 3<<13), steered}, // priority tag: native VLAN
		{NoVLAN, frameTo(vmMAC), passed},
		{NoVLAN, tagFrame(vmMAC, 10), steered},
		{0, frameTo(otherMAC), steered},
		{0, tagFrame(otherMAC, 10), passed},
		{0, tagFrame(vmMAC, 10)[:15], passed}, // the tag cut short: native VLAN 0
	} {
		setCfg(t, o, Policy{Mode: ModeMAC, NativeVLAN: tc.native})
		before := readCounters(t, o)
		if _, err := o.XvsSteer.Run(&ebpf.RunOptions{Data: tc.frame}); err != nil {
			t.Fatal(err)
		}
		if d := readCounters(t, o).Sub(before); d != tc.want {
			t.Errorf("native %d, frame %x: counted %+v, want %+v", tc.native, tc.frame[:16], d, tc.want)
		}
	}
}
