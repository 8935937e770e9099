package vhost_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"

	"github.com/xvswitch/xvswitch/vhost"
	"github.com/xvswitch/xvswitch/vhost/vhosttest"
	"github.com/xvswitch/xvswitch/virtionet"
	"github.com/xvswitch/xvswitch/virtq"
)

func TestNegotiation(t *testing.T) {
	mac := net.HardwareAddr{0x52, 0x54, 0, 0x12, 0x34, 0x56}
	d, _, _ := newDevice(t, vhost.Config{QueuePairs: 2, MAC: mac, MTU: 9000})
	f := vhosttest.Connect(t, d)
	want := uint64(1)<<virtq.FeatureVersion1 | 1<<virtq.FeatureRingPacked | 1<<virtq.FeatureEventIdx |
		1<<virtq.FeatureIndirectDesc | 1<<vhost.NetFeatureMrgRxbuf | 1<<vhost.NetFeatureStatus | 1<<vhost.FeatureProtocolFeatures |
		1<<vhost.NetFeatureMTU | 1<<vhost.NetFeatureMAC | 1<<vhost.NetFeatureMQ | 1<<virtq.FeatureInOrder |
		1<<vhost.NetFeatureGuestAnnounce | 1<<vhost.FeatureLogAll |
		1<<virtionet.FeatureCsum | 1<<virtionet.FeatureGuestCsum | 1<<virtionet.FeatureHostTSO4 |
		1<<virtionet.FeatureHostTSO6 | 1<<virtionet.FeatureGuestTSO4 | 1<<virtionet.FeatureGuestTSO6
	if got := f.CallU64(vhosttest.ReqGetFeatures); got != want {
		t.Fatalf("GET_FEATURES = %#x, want %#x", got, want)
	}
	if got := f.CallU64(vhosttest.ReqGetProtocolFeatures); got != vhost.OfferedProtocolFeatures {
		t.Fatalf("GET_PROTOCOL_FEATURES = %#x, want %#x", got, vhost.OfferedProtocolFeatures)
	}
	if got := f.CallU64(vhosttest.ReqGetQueueNum); got != 2 {
		t.Fatalf("GET_QUEUE_NUM = %d, want 2 (queue pairs)", got)
	}
	if got := f.CallU64(vhosttest.ReqGetMaxMemSlots); got != vhost.MaxMemSlots {
		t.Fatalf("GET_MAX_MEM_SLOTS = %d", got)
	}
	f.Negotiate(want, vhosttest.ProtocolQEMU)
	f.MustAck(vhosttest.ReqNetSetMTU, vhosttest.U64(8000))
	f.MustAck(vhosttest.ReqSetStatus, vhosttest.U64(vhost.StatusAcknowledge|vhost.StatusDriver|vhost.StatusFeaturesOK))
	if got := f.CallU64(vhosttest.ReqGetStatus); got != vhost.StatusAcknowledge|vhost.StatusDriver|vhost.StatusFeaturesOK {
		t.Fatalf("GET_STATUS = %#x", got)
	}
	// GET_CONFIG: mac, status (link up), max_virtqueue_pairs, mtu.
	req := vhosttest.ConfigRequest(0, vhosttest.NetConfigSize)
	p := f.Call(vhosttest.ReqGetConfig, req)
	if len(p) != len(req) {
		t.Fatalf("GET_CONFIG reply of %d bytes, want %d", len(p), len(req))
	}
	cs := p[vhosttest.ConfigHeaderSize:]
	if !bytes.Equal(cs[:6], mac) || binary.LittleEndian.Uint16(cs[6:]) != 1 ||
		binary.LittleEndian.Uint16(cs[8:]) != 2 || binary.LittleEndian.Uint16(cs[10:]) != 8000 {
		t.Fatalf("config space % x", cs)
	}
	// Beyond the config space: an empty reply, and the session goes on.
	if p := f.Call(vhosttest.ReqGetConfig, vhosttest.ConfigRequest(8, vhosttest.NetConfigSize)); len(p) != 0 {
		t.Fatalf("GET_CONFIG past the end: %d bytes", len(p))
	}
	inf := d.Info()
	if !inf.Connected || inf.Features != want || inf.Protocol != vhosttest.ProtocolQEMU || !inf.Packed || inf.MTU != 8000 {
		t.Fatalf("Info = %+v", inf)
	}
}

func TestFeaturesOffered(t *testing.T) {
	d, _, _ := newDevice(t, vhost.Config{NoInOrder: true, DisableFeatures: 1 << virtq.FeatureRingPacked})
	f := vhosttest.Connect(t, d)
	got := f.CallU64(vhosttest.ReqGetFeatures)
	if virtq.Has(got, virtq.FeatureInOrder) || virtq.Has(got, virtq.FeatureRingPacked) ||
		virtq.Has(got, vhost.NetFeatureMAC) || virtq.Has(got, vhost.NetFeatureMTU) || virtq.Has(got, vhost.NetFeatureMQ) {
		t.Fatalf("features %#x", got)
	}
	// Acking a feature that was not offered breaks the session.
	if v, err := f.Ack(vhosttest.ReqSetFeatures, vhosttest.U64(got|1<<virtq.FeatureRingPacked)); err != nil || v == 0 {
		t.Fatalf("SET_FEATURES with an unoffered bit: %d, %v", v, err)
	}
	if err := f.WaitClosed(); !errors.Is(err, vhost.ErrBadFeatures) {
		t.Fatalf("session ended with %v", err)
	}
}

// testSession is a device with one queue pair running over either kind of
// ring, and the front-end that set it up.
type testSession struct {
	d   *vhost.Device
	f   *vhosttest.FrontEnd
	evs *[]vhost.Event
	mu  *sync.Mutex
}

func startSession(t testing.TB, cfg vhost.Config, packed bool, features uint64) *testSession {
	t.Helper()
	return startSessionWith(t, cfg, vhosttest.Options{Packed: packed, Features: features})
}

// startSessionWith is startSession with the front-end's options given whole.
func startSessionWith(t testing.TB, cfg vhost.Config, o vhosttest.Options) *testSession {
	t.Helper()
	d, evs, mu := newDevice(t, cfg)
	f := vhosttest.Connect(t, d)
	f.Start(o)
	vhosttest.WaitFor(t, "device ready", func() bool { return d.Info().Ready })
	return &testSession{d: d, f: f, evs: evs, mu: mu}
}

// bothRings runs f on a fresh session (DefaultFeatures) of each ring kind.
func bothRings(t *testing.T, f func(t *testing.T, s *testSession)) {
	for _, packed := range []bool{true, false} {
		t.Run(fmt.Sprintf("packed=%v", packed), func(t *testing.T) {
			f(t, startSession(t, vhost.Config{}, packed, vhosttest.DefaultFeatures))
		})
	}
}

// tx is the guest's view of vring 1.
func (s *testSession) tx() *vhosttest.Ring { return s.f.TxRing(0) }

func frame(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = seed + byte(i*7)
	}
	copy(b[0:6], []byte{0x52, 0x54, 0, 0, 0, seed})
	copy(b[6:12], []byte{0x52, 0x54, 0, 0, 1, seed})
	return b
}

// guestSend puts frames on the guest's TX ring, each after a zero header.
func (s *testSession) guestSend(t testing.TB, frames ...[]byte) {
	t.Helper()
	if n := s.f.Send(0, frames...); n != len(frames) {
		t.Fatalf("guest sent %d of %d frames: TX ring full", n, len(frames))
	}
}

// deviceReceive plays the switch: one burst from the guest's TX queue.
func (s *testSession) deviceReceive(t *testing.T) [][]byte {
	t.Helper()
	q := s.d.TxQueue(0)
	a := q.Begin()
	if a == nil {
		t.Fatal("TX queue not running")
	}
	defer q.End()
	n, err := a.Tx.Receive(virtq.MaxBurst)
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	fr := a.Tx.Frames()
	for i := 0; i < fr.Len(); i++ {
		b := make([]byte, fr.FrameLen(i))
		fr.Peek(i, b)
		out = append(out, b)
	}
	// Chains a resumed ring dropped at its start are counted in the
	// first burst without being popped by it.
	if lb := a.Tx.LastBurst(); n != len(out)+int(lb.Dropped()-lb.Drops[virtionet.DropResumeDropped]) {
		t.Fatalf("popped %d chains, %d frames, %d dropped", n, len(out), lb.Dropped())
	}
	if err := a.Tx.Complete(); err != nil {
		t.Fatal(err)
	}
	return out
}

// deviceDeliver plays the switch: one burst into the guest's RX queue.
func (s *testSession) deviceDeliver(t *testing.T, frames ...[]byte) int {
	t.Helper()
	q := s.d.RxQueue(0)
	a := q.Begin()
	if a == nil {
		t.Fatal("RX queue not running")
	}
	defer q.End()
	var fs virtionet.Frames
	for _, fr := range frames {
		fs.AddBytes(fr)
	}
	n, err := a.Rx.Deliver(&fs)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestFramesBothWays moves frames through both ring kinds, with the guest's
// regions at the start of their memfds and, as QEMU places all but a
// backend's first, far into them at an offset that is not page aligned.
func TestFramesBothWays(t *testing.T) {
	for _, c := range []struct {
		packed bool
		offset uint64
	}{{true, 0}, {false, 0}, {true, 4<<30 + 0x800}, {false, 4<<30 + 0x800}} {
		t.Run(fmt.Sprintf("packed=%v/offset=%#x", c.packed, c.offset), func(t *testing.T) {
			packed := c.packed
			s := startSessionWith(t, vhost.Config{}, vhosttest.Options{Packed: packed, Features: vhosttest.DefaultFeatures, MmapOffset: c.offset})
			if !hasEvent(s.mu, s.evs, vhost.EventConnected) || !hasEvent(s.mu, s.evs, vhost.EventReady) {
				t.Fatalf("events %v", *s.evs)
			}
			if got := s.d.Info().Packed; got != packed {
				t.Fatalf("Info.Packed = %v", got)
			}
			// Guest -> device: frames of several sizes, bytes intact.
			var sent [][]byte
			for i, n := range []int{60, 64, 1514, 300, 1000} {
				sent = append(sent, frame(n, byte(i)))
			}
			s.guestSend(t, sent...)
			got := s.deviceReceive(t)
			if len(got) != len(sent) {
				t.Fatalf("device received %d frames, guest sent %d", len(got), len(sent))
			}
			for i := range sent {
				if !bytes.Equal(got[i], sent[i]) {
					t.Fatalf("frame %d differs", i)
				}
			}
			cs, err := s.tx().Reap()
			if err != nil || len(cs) != len(sent) {
				t.Fatalf("guest reaped %d TX completions (%v), want %d", len(cs), err, len(sent))
			}
			if s.f.WaitCall(1, vhosttest.Timeout) == 0 {
				t.Fatal("TX completions without an interrupt")
			}
			st := s.d.TxQueue(0).Stats()
			if st.Packets != uint64(len(sent)) || st.Dropped() != 0 {
				t.Fatalf("TX stats %+v", st)
			}

			// Device -> guest: frames land after a header with num_buffers 1.
			s.f.PostRx(0, 8)
			in := [][]byte{frame(60, 9), frame(1514, 10), frame(999, 11)}
			if n := s.deviceDeliver(t, in...); n != len(in) {
				t.Fatalf("delivered %d of %d", n, len(in))
			}
			rs := s.f.Receive(0)
			if len(rs) != len(in) {
				t.Fatalf("guest received %d frames, want %d", len(rs), len(in))
			}
			for i, r := range rs {
				if want := virtionet.HeaderLen + len(in[i]); r.Len != want {
					t.Fatalf("RX %d: used length %d, want %d", i, r.Len, want)
				}
				if r.NumBuffers != 1 {
					t.Fatalf("RX %d: num_buffers %d", i, r.NumBuffers)
				}
				if !bytes.Equal(r.Frame, in[i]) {
					t.Fatalf("RX %d: bytes differ", i)
				}
			}
			if s.f.WaitCall(0, vhosttest.Timeout) == 0 {
				t.Fatal("RX delivery without an interrupt")
			}
		})
	}
}

var deliverFrames virtionet.Frames

// TestOffloadsOffered: the checksum and TSO offloads are offered both ways
// unless NoOffloads; UFO, USO, ECN and CTRL_GUEST_OFFLOADS never are.
func TestOffloadsOffered(t *testing.T) {
	offloads := []int{virtionet.FeatureCsum, virtionet.FeatureGuestCsum, virtionet.FeatureHostTSO4,
		virtionet.FeatureHostTSO6, virtionet.FeatureGuestTSO4, virtionet.FeatureGuestTSO6}
	never := []int{virtionet.FeatureCtrlGuestOffloads, virtionet.FeatureGuestECN, virtionet.FeatureGuestUFO,
		virtionet.FeatureHostECN, virtionet.FeatureHostUFO}
	for _, off := range []bool{false, true} {
		d, _, _ := newDevice(t, vhost.Config{NoOffloads: off})
		got := vhosttest.Connect(t, d).CallU64(vhosttest.ReqGetFeatures)
		for _, b := range offloads {
			if virtq.Has(got, uint(b)) == off {
				t.Errorf("NoOffloads=%v: feature %d offered %v", off, b, !off)
			}
		}
		for _, b := range never {
			if virtq.Has(got, uint(b)) {
				t.Errorf("feature %d offered", b)
			}
		}
	}
}
