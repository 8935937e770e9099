package vhost

import (
	"testing"

	"github.com/xvswitch/xvswitch/virtionet"
	"github.com/xvswitch/xvswitch/virtq"
	"github.com/xvswitch/xvswitch/virtq/drivertest"
)

// TestInOrderPacked: with IN_ORDER negotiated the device completes TX
// chains (header and frame in separate descriptors, as virtio-user sends
// them) in order and the driver model, which checks the in-order rules,
// reclaims every slot over several laps of the ring.
func TestInOrderPacked(t *testing.T) {
	s := startSessionInOrder(t)
	for lap := 0; lap < 20; lap++ {
		for i := 0; i < 32; i++ {
			hdr := s.f.mem.Alloc(1, virtionet.HeaderLen, 16)
			fr := frame(64, byte(i))
			body := s.f.mem.Alloc(1, uint64(len(fr)), 64)
			copy(s.f.mem.Bytes(body, uint64(len(fr))), fr)
			if _, err := s.tx.add(drivertest.PackedBuf{Addr: hdr, Len: virtionet.HeaderLen}, drivertest.PackedBuf{Addr: body, Len: uint32(len(fr))}); err != nil {
				t.Fatalf("lap %d: %v", lap, err)
			}
		}
		if got := len(s.deviceReceive(t)); got != 32 {
			t.Fatalf("lap %d: %d frames", lap, got)
		}
		cs, err := s.tx.reap()
		if err != nil || len(cs) != 32 {
			t.Fatalf("lap %d: reaped %d: %v (used descs %d)", lap, len(cs), err, s.tx.p.UsedDescs)
		}
	}
}

func startSessionInOrder(t *testing.T) *testSession {
	t.Helper()
	d, evs, mu := newDevice(t, Config{})
	f := connect(t, d)
	features := featBase | 1<<virtq.FeatureRingPacked | 1<<virtq.FeatureInOrder
	f.negotiate(features, protoQEMU)
	f.shareMemory(protoQEMU, 4<<20, 1<<20)
	s := &testSession{d: d, f: f, evs: evs, mu: mu}
	s.rx = newGuestRing(f.mem, true, 256)
	s.tx = newGuestRing(f.mem, true, 64)
	s.tx.p.InOrder = true
	s.tx.p.ScrambleIDs = true // as DPDK leaves them: only the last carries the id
	f.setupRing(0, s.rx, protoQEMU, true)
	f.setupRing(1, s.tx, protoQEMU, true)
	waitFor(t, "device ready", func() bool { return d.Info().Ready })
	return s
}
