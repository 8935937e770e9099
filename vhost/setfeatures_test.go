package vhost_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/xvswitch/xvswitch/vhost"
	"github.com/xvswitch/xvswitch/vhost/vhosttest"
	"github.com/xvswitch/xvswitch/virtionet"
	"github.com/xvswitch/xvswitch/virtq"
)

// ringsBeforeFeatures plays a front-end that starts split rings before it
// sends any SET_FEATURES (QEMU and DPDK never do; nothing forbids it):
// GET_FEATURES, SET_OWNER, memory, both rings of pair 0 kicked (without
// protocol features a ring runs from SET_VRING_KICK on), all under
// features 0.
func ringsBeforeFeatures(t *testing.T) *testSession {
	t.Helper()
	d, evs, mu := newDevice(t, vhost.Config{})
	f := vhosttest.Connect(t, d)
	f.CallU64(vhosttest.ReqGetFeatures)
	if err := f.SendMsg(vhosttest.ReqSetOwner, vhosttest.FlagVersion, nil); err != nil {
		t.Fatal(err)
	}
	f.ShareMemory(4<<20, 4<<20)
	f.SetupRing(0, f.NewRing(false, 256), false)
	f.SetupRing(1, f.NewRing(false, 256), false)
	f.CallU64(vhosttest.ReqGetFeatures) // orders what was sent before it
	vhosttest.WaitFor(t, "rings running under features 0", func() bool { return d.Info().Ready })
	return &testSession{d: d, f: f, evs: evs, mu: mu}
}

// TestFirstSetFeaturesRebuildsRings: the first SET_FEATURES arriving after
// the rings started must rebuild them under the new features, as a later
// change does. With VERSION_1 and MRG_RXBUF the virtio-net header is 12
// bytes, not the legacy 10: a ring left at features 0 would hand the
// switch frames with two header bytes in front and write the guest a
// header two bytes short.
func TestFirstSetFeaturesRebuildsRings(t *testing.T) {
	s := ringsBeforeFeatures(t)
	want := uint64(1)<<virtq.FeatureVersion1 | 1<<vhost.NetFeatureMrgRxbuf | 1<<virtq.FeatureEventIdx
	if err := s.f.SendMsg(vhosttest.ReqSetFeatures, vhosttest.FlagVersion, vhosttest.U64(want)); err != nil {
		t.Fatal(err)
	}
	s.f.CallU64(vhosttest.ReqGetFeatures)
	if inf := s.d.Info(); inf.Features != want || !inf.Ready {
		t.Fatalf("after SET_FEATURES: %+v", inf)
	}

	sent := []byte(nil)
	sent = append(sent, frame(100, 1)...)
	s.guestSend(t, sent)
	got := s.deviceReceive(t)
	if len(got) != 1 || !bytes.Equal(got[0], sent) {
		t.Fatalf("device received %q, guest sent %q", got, sent)
	}

	s.f.PostRx(0, 4)
	in := frame(200, 2)
	if n := s.deviceDeliver(t, in); n != 1 {
		t.Fatalf("delivered %d", n)
	}
	vhosttest.WaitFor(t, "the frame in the guest", func() bool {
		rs := s.f.Receive(0)
		if len(rs) == 0 {
			return false
		}
		if rs[0].Len != virtionet.HeaderLen+len(in) || rs[0].NumBuffers != 1 || !bytes.Equal(rs[0].Frame, in) {
			t.Fatalf("guest received len %d num_buffers %d %q, want len %d, 1, %q",
				rs[0].Len, rs[0].NumBuffers, rs[0].Frame, virtionet.HeaderLen+len(in), in)
		}
		return true
	})
}

// TestFirstSetFeaturesRingKindRefused: a first SET_FEATURES that makes
// started split rings packed cannot be applied (the ring layout and its
// saved state do not carry over between kinds): the device is broken with
// that reason, as DPDK's back-end refuses feature changes while running.
func TestFirstSetFeaturesRingKindRefused(t *testing.T) {
	s := ringsBeforeFeatures(t)
	f := vhosttest.DefaultFeatures&^(1<<vhost.FeatureProtocolFeatures) | 1<<virtq.FeatureRingPacked
	if err := s.f.SendMsg(vhosttest.ReqSetFeatures, vhosttest.FlagVersion, vhosttest.U64(f)); err != nil {
		t.Fatal(err)
	}
	err := s.f.WaitClosed()
	if !errors.Is(err, vhost.ErrFeaturesChanged) {
		t.Fatalf("session ended with %v, want ErrFeaturesChanged", err)
	}
	if !hasEvent(s.mu, s.evs, vhost.EventBroken) {
		t.Fatalf("no broken event: %v", *s.evs)
	}
}
