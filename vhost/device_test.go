package vhost

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"

	"github.com/xvswitch/xvswitch/virtionet"
	"github.com/xvswitch/xvswitch/virtq"
	"github.com/xvswitch/xvswitch/virtq/drivertest"
)

const (
	protoQEMU = uint64(1)<<ProtoMQ | 1<<ProtoReplyAck | 1<<ProtoMTU | 1<<ProtoConfigureMemSlots | 1<<ProtoStatus | 1<<ProtoRARP
	featBase  = uint64(1)<<virtq.FeatureVersion1 | 1<<NetFeatureMrgRxbuf | 1<<FeatureProtocolFeatures | 1<<virtq.FeatureEventIdx
)

func TestNegotiation(t *testing.T) {
	mac := net.HardwareAddr{0x52, 0x54, 0, 0x12, 0x34, 0x56}
	d, _, _ := newDevice(t, Config{QueuePairs: 2, MAC: mac, MTU: 9000})
	f := connect(t, d)
	want := uint64(1)<<virtq.FeatureVersion1 | 1<<virtq.FeatureRingPacked | 1<<virtq.FeatureEventIdx |
		1<<virtq.FeatureIndirectDesc | 1<<NetFeatureMrgRxbuf | 1<<NetFeatureStatus | 1<<FeatureProtocolFeatures |
		1<<NetFeatureMTU | 1<<NetFeatureMAC | 1<<NetFeatureMQ | 1<<virtq.FeatureInOrder
	if got := f.callU64(reqGetFeatures); got != want {
		t.Fatalf("GET_FEATURES = %#x, want %#x", got, want)
	}
	if got := f.callU64(reqGetProtocolFeatures); got != offeredProtocolFeatures {
		t.Fatalf("GET_PROTOCOL_FEATURES = %#x, want %#x", got, offeredProtocolFeatures)
	}
	if got := f.callU64(reqGetQueueNum); got != 2 {
		t.Fatalf("GET_QUEUE_NUM = %d, want 2 (queue pairs)", got)
	}
	if got := f.callU64(reqGetMaxMemSlots); got != maxMemSlots {
		t.Fatalf("GET_MAX_MEM_SLOTS = %d", got)
	}
	f.negotiate(want, protoQEMU)
	f.mustAck(reqNetSetMTU, u64b(8000))
	f.mustAck(reqSetStatus, u64b(StatusAcknowledge|StatusDriver|StatusFeaturesOK))
	if got := f.callU64(reqGetStatus); got != StatusAcknowledge|StatusDriver|StatusFeaturesOK {
		t.Fatalf("GET_STATUS = %#x", got)
	}
	// GET_CONFIG: mac, status (link up), max_virtqueue_pairs, mtu.
	req := make([]byte, configSpaceHeaderSize+virtioNetConfigSize)
	binary.LittleEndian.PutUint32(req[4:], virtioNetConfigSize)
	p := f.call(reqGetConfig, req)
	if len(p) != len(req) {
		t.Fatalf("GET_CONFIG reply of %d bytes, want %d", len(p), len(req))
	}
	cs := p[configSpaceHeaderSize:]
	if !bytes.Equal(cs[:6], mac) || binary.LittleEndian.Uint16(cs[6:]) != 1 ||
		binary.LittleEndian.Uint16(cs[8:]) != 2 || binary.LittleEndian.Uint16(cs[10:]) != 8000 {
		t.Fatalf("config space % x", cs)
	}
	// Beyond the config space: an empty reply, and the session goes on.
	binary.LittleEndian.PutUint32(req[0:], 8)
	if p := f.call(reqGetConfig, req); len(p) != 0 {
		t.Fatalf("GET_CONFIG past the end: %d bytes", len(p))
	}
	inf := d.Info()
	if !inf.Connected || inf.Features != want || inf.Protocol != protoQEMU || !inf.Packed || inf.MTU != 8000 {
		t.Fatalf("Info = %+v", inf)
	}
}

func TestFeaturesOffered(t *testing.T) {
	d, _, _ := newDevice(t, Config{NoInOrder: true, DisableFeatures: 1 << virtq.FeatureRingPacked})
	f := connect(t, d)
	got := f.callU64(reqGetFeatures)
	if virtq.Has(got, virtq.FeatureInOrder) || virtq.Has(got, virtq.FeatureRingPacked) ||
		virtq.Has(got, NetFeatureMAC) || virtq.Has(got, NetFeatureMTU) || virtq.Has(got, NetFeatureMQ) {
		t.Fatalf("features %#x", got)
	}
	// Acking a feature that was not offered breaks the session.
	if v, err := f.ack(reqSetFeatures, u64b(got|1<<virtq.FeatureRingPacked)); err != nil || v == 0 {
		t.Fatalf("SET_FEATURES with an unoffered bit: %d, %v", v, err)
	}
	if err := f.expectClosed(); !errors.Is(err, ErrBadFeatures) {
		t.Fatalf("session ended with %v", err)
	}
}

// session sets up a device with one queue pair running over kind of ring.
type testSession struct {
	d      *Device
	f      *frontend
	rx, tx *guestRing // the guest's views of vrings 0 and 1
	evs    *[]Event
	mu     *sync.Mutex
}

func startSession(t testing.TB, cfg Config, packed bool, features uint64) *testSession {
	t.Helper()
	d, evs, mu := newDevice(t, cfg)
	f := connect(t, d)
	if packed {
		features |= 1 << virtq.FeatureRingPacked
	}
	f.negotiate(features, protoQEMU)
	f.shareMemory(protoQEMU, 4<<20, 1<<20)
	s := &testSession{d: d, f: f, evs: evs, mu: mu}
	s.rx = newGuestRing(f.mem, packed, 256)
	s.tx = newGuestRing(f.mem, packed, 256)
	f.setupRing(0, s.rx, protoQEMU, true)
	f.setupRing(1, s.tx, protoQEMU, true)
	waitFor(t, "device ready", func() bool { return d.Info().Ready })
	return s
}

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
func (s *testSession) guestSend(t *testing.T, frames ...[]byte) {
	t.Helper()
	for _, fr := range frames {
		gpa := s.f.mem.Alloc(1, uint64(virtionet.HeaderLen+len(fr)), 64)
		buf := s.f.mem.Bytes(gpa, uint64(virtionet.HeaderLen+len(fr)))
		clear(buf[:virtionet.HeaderLen])
		copy(buf[virtionet.HeaderLen:], fr)
		if _, err := s.tx.add(drivertest.PackedBuf{Addr: gpa, Len: uint32(len(buf))}); err != nil {
			t.Fatal(err)
		}
	}
	s.f.kickRing(1)
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
	if n != len(out) {
		t.Fatalf("popped %d chains, %d frames", n, len(out))
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

// postRx posts n receive buffers of size bytes and returns their addresses by id.
func (s *testSession) postRx(t *testing.T, n, size int) map[uint16]uint64 {
	t.Helper()
	bufs := map[uint16]uint64{}
	for i := 0; i < n; i++ {
		gpa := s.f.mem.Alloc(1, uint64(size), 64)
		id, err := s.rx.add(drivertest.PackedBuf{Addr: gpa, Len: uint32(size), Write: true})
		if err != nil {
			t.Fatal(err)
		}
		bufs[id] = gpa
	}
	return bufs
}

func TestFramesBothWays(t *testing.T) {
	for _, packed := range []bool{true, false} {
		t.Run(fmt.Sprintf("packed=%v", packed), func(t *testing.T) {
			s := startSession(t, Config{}, packed, featBase)
			if !hasEvent(s.mu, s.evs, EventConnected) || !hasEvent(s.mu, s.evs, EventReady) {
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
			cs, err := s.tx.reap()
			if err != nil || len(cs) != len(sent) {
				t.Fatalf("guest reaped %d TX completions (%v), want %d", len(cs), err, len(sent))
			}
			if s.f.interrupts(1) == 0 {
				t.Fatal("TX completions without an interrupt")
			}
			st := s.d.TxQueue(0).Stats()
			if st.Packets != uint64(len(sent)) || st.Dropped() != 0 {
				t.Fatalf("TX stats %+v", st)
			}

			// Device -> guest: frames land after a header with num_buffers 1.
			bufs := s.postRx(t, 8, 2048)
			in := [][]byte{frame(60, 9), frame(1514, 10), frame(999, 11)}
			if n := s.deviceDeliver(t, in...); n != len(in) {
				t.Fatalf("delivered %d of %d", n, len(in))
			}
			cs, err = s.rx.reap()
			if err != nil || len(cs) != len(in) {
				t.Fatalf("guest reaped %d RX completions (%v), want %d", len(cs), err, len(in))
			}
			for i, c := range cs {
				want := virtionet.HeaderLen + len(in[i])
				if int(c.len) != want {
					t.Fatalf("RX %d: used length %d, want %d", i, c.len, want)
				}
				b := s.f.mem.Bytes(bufs[c.id], uint64(want))
				if nb := binary.LittleEndian.Uint16(b[10:]); nb != 1 {
					t.Fatalf("RX %d: num_buffers %d", i, nb)
				}
				if !bytes.Equal(b[virtionet.HeaderLen:], in[i]) {
					t.Fatalf("RX %d: bytes differ", i)
				}
			}
			if s.f.interrupts(0) == 0 {
				t.Fatal("RX delivery without an interrupt")
			}
		})
	}
}

var deliverFrames virtionet.Frames
