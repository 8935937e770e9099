package vswitch

import (
	"testing"

	"github.com/xvswitch/xvswitch/virtionet"
)

// TestVirtioDropsMapDistinctly: every virtio-net drop reason is counted
// under a switch reason of its own, so none is mistaken for another (a
// reason left out of the table would map to the zero Drop and collide).
func TestVirtioDropsMapDistinctly(t *testing.T) {
	seen := map[Drop]virtionet.DropReason{}
	for r := virtionet.DropReason(0); r < virtionet.NumDropReasons; r++ {
		d := virtioDrop[r]
		if d >= NumDrops {
			t.Errorf("virtionet %s maps to no switch reason (%d)", r, d)
		}
		if prev, dup := seen[d]; dup {
			t.Errorf("virtionet %s and %s both count as %s", prev, r, d)
		}
		seen[d] = r
	}
}

// TestCountVirtioDrops: on ingress a rejected frame is received and
// dropped; on egress only dropped.
func TestCountVirtioDrops(t *testing.T) {
	var st virtionet.Stats
	st.Drops[virtionet.DropMalformed] = 2
	st.Drops[virtionet.DropQueueStopped] = 1
	var in, out Counts
	countVirtioDrops(&in, &st.Drops, true)
	countVirtioDrops(&out, &st.Drops, false)
	if in.packets != 3 || in.drops[DropMalformed] != 2 || in.drops[DropPortDown] != 1 {
		t.Errorf("ingress: %+v", in)
	}
	if out.packets != 0 || out.drops[DropMalformed] != 2 || out.drops[DropPortDown] != 1 {
		t.Errorf("egress: %+v", out)
	}
}
