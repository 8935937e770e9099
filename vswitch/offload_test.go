package vswitch

import (
	"bytes"
	"math/rand"
	"testing"

	"github.com/xvswitch/xvswitch/vhost/vhosttest"
	"github.com/xvswitch/xvswitch/virtionet"
)

// TestVhostTSOFrame: a 64 KB TSO frame from a guest reaches a guest that
// negotiated GUEST_TSO as that one frame (mergeable buffers), its header
// saying what is left to do, and a guest without offloads as segments
// that each verify, carrying the payload byte for byte; the counters
// balance with the segments counted as segment copies.
func TestVhostTSOFrame(t *testing.T) {
	for _, packed := range []bool{true, false} {
		t.Run(ringName(packed), func(t *testing.T) {
			s := startTestSwitch(t, Config{Workers: 1})
			a := addGuest(t, s, "a", 0x0252_5400_0001, vhosttest.Options{Packed: packed, Features: vhosttest.DefaultFeatures | featTxOffloads})
			b := addGuest(t, s, "b", 0x0252_5400_0002, vhosttest.Options{Packed: packed, Features: vhosttest.DefaultFeatures | featRxOffloads})
			c := addGuest(t, s, "c", 0x0252_5400_0003, vhosttest.Options{Packed: !packed})
			b.fe.PostRx(0, 100)
			c.fe.PostRx(0, 100)
			payload := make([]byte, 64000)
			rand.New(rand.NewSource(1)).Read(payload)
			const mss = 1448

			toB, h := tsoFrame(b.mac, a.mac, payload, mss)
			if a.fe.SendWithHeader(0, h, toB) != 1 {
				t.Fatal("a could not send")
			}
			got := b.fe.Receive(0)
			waitFor(t, "the frame at b", func() bool { got = append(got, b.fe.Receive(0)...); return len(got) > 0 })
			if len(got) != 1 || !bytes.Equal(got[0].Frame, toB) {
				t.Fatalf("b got %d frames (first %d bytes), want one of %d", len(got), len(got[0].Frame), len(toB))
			}
			if hb := got[0].Header; hb.Flags != virtionet.FlagNeedsCsum || hb.GSOType != virtionet.GSOTCPv4 ||
				hb.GSOSize != mss || hb.CsumStart != 34 || hb.CsumOffset != 16 || got[0].NumBuffers < 2 {
				t.Fatalf("b's header %+v", hb)
			}

			toC, h := tsoFrame(c.mac, a.mac, payload, mss)
			a.fe.SendWithHeader(0, h, toC)
			want := (len(payload) + mss - 1) / mss
			segs := c.receive(t, 0, want)
			var joined []byte
			for k, seg := range segs {
				seq, flags, p := checkTCPv4(t, seg)
				if seq != 1000+uint32(k*mss) || flags&0x08 != 0 && k != want-1 {
					t.Fatalf("segment %d: seq %d flags %#x", k, seq, flags)
				}
				joined = append(joined, p...)
			}
			if len(segs) != want || !bytes.Equal(joined, payload) {
				t.Fatalf("c got %d segments, want %d; payload equal %v", len(segs), want, bytes.Equal(joined, payload))
			}

			// A partial checksum alone, to the guest that cannot take it.
			small, h := tsoFrame(c.mac, a.mac, payload[:1000], 0)
			a.fe.SendWithHeader(0, h, small)
			one := c.receive(t, 0, 1)
			if _, _, p := checkTCPv4(t, one[0]); !bytes.Equal(p, payload[:1000]) {
				t.Fatal("checksummed frame's payload differs")
			}

			// A burst's ingress counters are flushed after its egress ones.
			waitFor(t, "counters", func() bool {
				return portStats(s, "c").TxPackets == uint64(want+1) && portStats(s, "a").RxPackets == 3
			})
			if st := portStats(s, "c"); st.SegmentCopies != uint64(want-1) || len(st.Drops) != 0 {
				t.Errorf("c: %+v", st)
			}
			if st := portStats(s, "a"); st.RxPackets != 3 || len(st.Drops) != 0 {
				t.Errorf("a: %+v", st)
			}
			balance(t, s)
		})
	}
}

// TestVhostHostileOffloadHeaders: every bad offload header a guest sends
// is a drop under its own reason at its port, and the frames after it
// still pass.
func TestVhostHostileOffloadHeaders(t *testing.T) {
	s := startTestSwitch(t, Config{Workers: 1})
	a := addGuest(t, s, "a", 0x0252_5400_0001, vhosttest.Options{Packed: true, Features: vhosttest.DefaultFeatures | featTxOffloads})
	b := addGuest(t, s, "b", 0x0252_5400_0002, vhosttest.Options{Packed: true})
	b.fe.PostRx(0, 200)
	payload := make([]byte, 3000)
	fr, good := tsoFrame(b.mac, a.mac, payload, 1000)
	bad := map[string]virtionet.Header{}
	h := good
	h.CsumOffset = 0xfff0
	bad["bad_csum_offset"] = h
	h = good
	h.GSOType = virtionet.GSOUDP
	bad["bad_gso_type"] = h
	h = good
	h.GSOSize = 0
	bad["bad_gso_size"] = h
	h = good
	h.Flags = 0
	bad["gso_without_csum"] = h
	for _, h := range bad {
		a.fe.SendWithHeader(0, h, fr)
	}
	// Headers the segmenter rejects (not TCP) are dropped at the egress.
	notTCP := append([]byte(nil), fr...)
	notTCP[23] = 17
	a.fe.SendWithHeader(0, good, notTCP)
	a.fe.SendWithHeader(0, good, fr)
	segs := b.receive(t, 0, 3)
	for _, seg := range segs {
		checkTCPv4(t, seg)
	}
	waitFor(t, "drops", func() bool { return len(portStats(s, "a").Drops) == len(bad) })
	st := portStats(s, "a")
	for reason := range bad {
		if st.Drops[reason] != 1 {
			t.Errorf("a: %s %d, drops %v", reason, st.Drops[reason], st.Drops)
		}
	}
	waitFor(t, "egress drop", func() bool { return portStats(s, "b").Drops["bad_gso_headers"] == 1 })
	balance(t, s)
}
