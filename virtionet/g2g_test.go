package virtionet

import (
	"bytes"
	"math/rand"
	"testing"
)

// TestGuestToGuest: frames guest A sends are copied once, straight from A's
// TX buffers into B's RX buffers, and arrive byte-exact, across ring kinds
// and header layouts; then both sides get their buffers back.
func TestGuestToGuest(t *testing.T) {
	for _, ka := range kinds {
		for _, kb := range kinds {
			for _, mrg := range []uint64{0, featMrg} {
				name := ka.String() + "-to-" + kb.String() + map[uint64]string{0: "", featMrg: "/mrg"}[mrg]
				t.Run(name, func(t *testing.T) {
					a := newGuest(t, ka, 256, 0)
					b := newGuest(t, kb, 256, 0)
					maxFrame := MaxFrameLen(9000)
					txA := NewTxQueue(a.ring, QueueConfig{Index: 1, Features: featV1, MaxFrame: maxFrame})
					rxB := NewRxQueue(b.ring, QueueConfig{Index: 0, Features: featV1 | mrg, MaxFrame: maxFrame})
					rng := rand.New(rand.NewSource(10))
					bufLen := uint32(HeaderLen + maxFrame)
					if mrg != 0 {
						bufLen = 2048
					}
					var sent [][]byte
					for round := 0; round < 4; round++ {
						for i := 0; i < 24; i++ {
							n := 14 + rng.Intn(1500)
							if i%6 == 0 {
								n = 9000
							}
							fr := frame(rng, n)
							sent = append(sent, fr)
							a.send(fr, HeaderLen, layouts[i%len(layouts)])
						}
						for i := 0; i < 200 && len(b.chains) < 200; i++ {
							b.post(bufLen)
						}
						for {
							n, err := txA.Receive(32)
							if err != nil {
								t.Fatal(err)
							}
							if n == 0 {
								break
							}
							if d, err := rxB.Deliver(txA.Frames()); err != nil || d != txA.Frames().Len() {
								t.Fatalf("Deliver = %d of %d, %v", d, txA.Frames().Len(), err)
							}
							if err := txA.Complete(); err != nil {
								t.Fatal(err)
							}
						}
						a.release(a.reap())
					}
					cs := b.reap()
					got, err := b.received(cs, HeaderLen, mrg != 0)
					if err != nil {
						t.Fatal(err)
					}
					if len(got) != len(sent) {
						t.Fatalf("B got %d frames, A sent %d", len(got), len(sent))
					}
					for i := range sent {
						if !bytes.Equal(got[i], sent[i]) {
							t.Fatalf("frame %d differs", i)
						}
					}
					sa, sb := txA.Snapshot(), rxB.Snapshot()
					if sa.Packets != uint64(len(sent)) || sb.Packets != sa.Packets || sb.Bytes != sa.Bytes || sa.Dropped()+sb.Dropped() != 0 {
						t.Fatalf("A %+v, B %+v", sa, sb)
					}
					if a.ring.InFlight() != 0 {
						t.Fatalf("A has %d chains in flight", a.ring.InFlight())
					}
				})
			}
		}
	}
}
