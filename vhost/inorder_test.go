package vhost_test

import (
	"testing"

	"github.com/xvswitch/xvswitch/vhost"
	"github.com/xvswitch/xvswitch/vhost/vhosttest"
	"github.com/xvswitch/xvswitch/virtionet"
	"github.com/xvswitch/xvswitch/virtq"
)

// TestInOrderPacked: with IN_ORDER negotiated the device completes TX
// chains (header and frame in separate descriptors, as virtio-user sends
// them) in order and the driver model, which checks the in-order rules,
// reclaims every slot over several laps of the ring.
func TestInOrderPacked(t *testing.T) {
	s := startSessionInOrder(t)
	m := s.f.Mem()
	for lap := 0; lap < 20; lap++ {
		for i := 0; i < 32; i++ {
			hdr := m.Alloc(1, virtionet.HeaderLen, 16)
			fr := frame(64, byte(i))
			body := m.Alloc(1, uint64(len(fr)), 64)
			copy(m.Bytes(body, uint64(len(fr))), fr)
			if _, err := s.tx().Add(vhosttest.Buf{Addr: hdr, Len: virtionet.HeaderLen}, vhosttest.Buf{Addr: body, Len: uint32(len(fr))}); err != nil {
				t.Fatalf("lap %d: %v", lap, err)
			}
		}
		if got := len(s.deviceReceive(t)); got != 32 {
			t.Fatalf("lap %d: %d frames", lap, got)
		}
		cs, err := s.tx().Reap()
		if err != nil || len(cs) != 32 {
			t.Fatalf("lap %d: reaped %d: %v (used descs %d)", lap, len(cs), err, s.tx().Packed().UsedDescs)
		}
	}
}

func startSessionInOrder(t *testing.T) *testSession {
	t.Helper()
	d, evs, mu := newDevice(t, vhost.Config{})
	f := vhosttest.Connect(t, d)
	features := vhosttest.DefaultFeatures | 1<<virtq.FeatureRingPacked | 1<<virtq.FeatureInOrder
	f.Negotiate(features, vhosttest.ProtocolQEMU)
	f.ShareMemory(4<<20, 1<<20)
	rx := f.NewRing(true, 256)
	tx := f.NewRing(true, 64)
	tx.Packed().InOrder = true
	tx.Packed().ScrambleIDs = true // as DPDK leaves them: only the last carries the id
	f.SetupRing(0, rx, true)
	f.SetupRing(1, tx, true)
	vhosttest.WaitFor(t, "device ready", func() bool { return d.Info().Ready })
	return &testSession{d: d, f: f, evs: evs, mu: mu}
}
