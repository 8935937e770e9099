package vhost_test

import (
	"bytes"
	"testing"

	"github.com/xvswitch/xvswitch/vhost"
	"github.com/xvswitch/xvswitch/vhost/vhosttest"
	"github.com/xvswitch/xvswitch/virtionet"
)

// TestZeroLengthDescriptor: a guest chain with a zero-length descriptor is
// dropped on its own, on either ring kind, instead of breaking the device:
// on the transmit queue it is counted as malformed and given back, the
// frames around it go through; on the receive queue (MRG_RXBUF) it goes
// back unwritten and the frame takes the next buffer.
func TestZeroLengthDescriptor(t *testing.T) {
	bothRings(t, func(t *testing.T, s *testSession) {
		mem := s.f.Mem()
		gpa := mem.Alloc(1, 4096, 64)

		a, c := frame(100, 1), frame(200, 3)
		s.guestSend(t, a)
		// A header and a frame, then an empty descriptor.
		hdrAndFrame := append(make([]byte, virtionet.HeaderLen), frame(150, 2)...)
		copy(mem.Bytes(gpa, uint64(len(hdrAndFrame))), hdrAndFrame)
		if _, err := s.tx().Add(vhosttest.Buf{Addr: gpa, Len: uint32(len(hdrAndFrame))}, vhosttest.Buf{Addr: gpa + 1024, Len: 0}); err != nil {
			t.Fatal(err)
		}
		s.guestSend(t, c)
		got := s.deviceReceive(t)
		if len(got) != 2 || !bytes.Equal(got[0], a) || !bytes.Equal(got[1], c) {
			t.Fatalf("device received %d frames, want the two around the malformed chain", len(got))
		}
		st := s.d.TxQueue(0).Stats()
		if st.Packets != 2 || st.Drops[virtionet.DropMalformed] != 1 || st.Dropped() != 1 {
			t.Fatalf("TX stats %+v, want 2 frames and 1 malformed", st)
		}
		if cs, err := s.tx().Reap(); err != nil || len(cs) != 3 {
			t.Fatalf("guest reaped %d TX completions (%v), want 3", len(cs), err)
		}

		// RX: an empty buffer first, then two good ones.
		rx := s.f.RxRing(0)
		bad, err := rx.Add(vhosttest.Buf{Addr: gpa + 2048, Len: 0, Write: true})
		if err != nil {
			t.Fatal(err)
		}
		s.f.PostRx(0, 2)
		in := [][]byte{frame(60, 4), frame(300, 5)}
		if n := s.deviceDeliver(t, in...); n != 2 {
			t.Fatalf("delivered %d of 2", n)
		}
		cs, err := rx.Reap()
		if err != nil || len(cs) != 3 || cs[0].ID != bad || cs[0].Len != 0 ||
			cs[1].Len != uint32(virtionet.HeaderLen+len(in[0])) || cs[2].Len != uint32(virtionet.HeaderLen+len(in[1])) {
			t.Fatalf("guest reaped %+v (%v): want the empty buffer back unwritten, then the two frames", cs, err)
		}
		if inf := s.d.Info(); !inf.Ready || hasEvent(s.mu, s.evs, vhost.EventBroken) {
			t.Fatalf("device after the zero-length descriptors: %+v", inf)
		}

		// Still running: another frame goes through.
		s.guestSend(t, a)
		if got := s.deviceReceive(t); len(got) != 1 || !bytes.Equal(got[0], a) {
			t.Fatalf("after: device received %d frames", len(got))
		}
	})
}
