package vswitch

import (
	"testing"

	"github.com/xvswitch/xvswitch/portspec"
	"github.com/xvswitch/xvswitch/vhost/vhosttest"
)

// TestVhostVLANs: VM <-> VM over vhost-user front-ends, both ring kinds:
// two access VLANs that never see each other's broadcast, unknown
// unicast or unicast, and a trunk guest that gets both, each with its
// tag, and whose tagged frames reach the access guests untagged. `show
// ports` says each port's settings, `show fdb` the VLAN of each MAC.
func TestVhostVLANs(t *testing.T) {
	s := startTestSwitch(t, Config{Workers: 1})
	spec := func(name string, mac uint64, v portspec.VLANs) portspec.Vhost {
		return portspec.Vhost{Name: name, MAC: MACString(mac), VLANs: v}
	}
	const m10a, m10b, m20a, mTr, mAway = 0x0252_5400_0a01, 0x0252_5400_0a02, 0x0252_5400_1401, 0x0252_5400_0099, 0x0252_5400_ffff
	a10 := addGuestSpec(t, s, spec("a10", m10a, portspec.VLANs{Tag: 10}), m10a, vhosttest.Options{Packed: true})
	b10 := addGuestSpec(t, s, spec("b10", m10b, portspec.VLANs{Tag: 10}), m10b, vhosttest.Options{Packed: false})
	a20 := addGuestSpec(t, s, spec("a20", m20a, portspec.VLANs{Tag: 20}), m20a, vhosttest.Options{Packed: true})
	tr := addGuestSpec(t, s, spec("tr", mTr, portspec.VLANs{Trunks: []int{10, 20}}), mTr, vhosttest.Options{Packed: false})
	for _, g := range []*guest{a10, b10, a20, tr} {
		g.fe.PostRx(0, 32)
	}
	bc := a10.frameTo(bcast, 1)   // broadcast in 10
	unk := a20.frameTo(mAway, 2)  // unknown unicast in 20
	uni := b10.frameTo(m10a, 3)   // unicast in 10
	fromTr := tr.frameTo(m20a, 4) // the trunk to a20, tagged 20
	wrong := tr.frameTo(m10b, 5)  // b10's MAC, but tagged 20: not b10's
	a10.fe.Send(0, bc)
	wantFrames(t, "b10", b10.receive(t, 0, 1), bc)
	a20.fe.Send(0, unk)
	b10.fe.Send(0, uni)
	wantFrames(t, "a10", a10.receive(t, 0, 1), uni)
	tr.fe.Send(0, tagged(20, fromTr), tagged(20, wrong))
	wantFrames(t, "a20", a20.receive(t, 0, 2), fromTr, wrong)
	wantFrames(t, "tr", tr.receive(t, 0, 2), tagged(10, bc), tagged(20, unk))
	// A tagged frame from an access guest is dropped, as is the trunk's
	// untagged frame and its VLAN 30.
	a10.fe.Send(0, tagged(10, a10.frameTo(bcast, 6)))
	tr.fe.Send(0, tr.frameTo(bcast, 7), tagged(30, tr.frameTo(bcast, 8)))
	waitFor(t, "drops", func() bool {
		return portStats(s, "a10").Drops["vlan_tagged_on_access"] == 1 &&
			portStats(s, "tr").Drops["vlan_untagged_on_trunk"] == 1 &&
			portStats(s, "tr").Drops["vlan_not_in_trunk"] == 1
	})
	balance(t, s)
	// Nothing more arrived anywhere.
	for _, g := range []*guest{a10, b10, a20, tr} {
		if extra := g.fe.Receive(0); len(extra) != 0 {
			t.Errorf("%s got %d more frames", g.name, len(extra))
		}
	}
	vlanOf := map[string]string{}
	for _, p := range s.Ports() {
		vlanOf[p.Name] = p.VLAN
	}
	if vlanOf["a10"] != "vlan=10" || vlanOf["a20"] != "vlan=20" || vlanOf["tr"] != "trunk=10+20" {
		t.Errorf("show ports VLANs: %v", vlanOf)
	}
	type at struct {
		mac, port string
		vlan      int
	}
	fdb := map[at]bool{}
	for _, r := range s.FDB() {
		fdb[at{r.MAC, r.Port, r.VLAN}] = true
	}
	for _, k := range []at{{MACString(m10a), "a10", 10}, {MACString(m20a), "a20", 20}, {MACString(mTr), "tr", 10}, {MACString(mTr), "tr", 20}} {
		if !fdb[k] {
			t.Errorf("fdb lacks %+v: %v", k, fdb)
		}
	}
	if fdb[at{MACString(m10a), "a10", 0}] {
		t.Errorf("a10's MAC in VLAN 0: %v", fdb)
	}
}
