package virtionet

import (
	"bytes"
	"errors"
	"math/rand"
	"testing"

	"github.com/xvswitch/xvswitch/virtq"
)

// rxCase sets up a guest RX ring and a queue over it.
func rxCase(t *testing.T, k ringKind, ringFeatures, netFeatures uint64, maxFrame int) (*guest, *RxQueue) {
	g := newGuest(t, k, 256, ringFeatures)
	q := NewRxQueue(g.ring, QueueConfig{Index: 0, Features: featV1 | netFeatures, MaxFrame: maxFrame})
	return g, q
}

// framesOf builds a Frames of single-segment frames (as from UMEM).
func framesOf(fs ...[]byte) *Frames {
	f := &Frames{}
	for _, b := range fs {
		f.AddBytes(b)
	}
	return f
}

// checkReceived reaps the guest and compares what arrived with want.
func checkReceived(t *testing.T, g *guest, mrg bool, want [][]byte) []completion {
	t.Helper()
	cs := g.reap()
	got, err := g.received(cs, HeaderLen, mrg)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("guest got %d frames, want %d", len(got), len(want))
	}
	for i := range want {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("frame %d differs (len %d, want %d)", i, len(got[i]), len(want[i]))
		}
	}
	return cs
}

func checkStats(t *testing.T, s Stats, packets int, bytes int, drops map[DropReason]int) {
	t.Helper()
	var want Stats
	want.Packets, want.Bytes = uint64(packets), uint64(bytes)
	for r, n := range drops {
		want.Drops[r] = uint64(n)
	}
	s.Notifies = 0
	if s != want {
		t.Fatalf("stats %+v, want %+v", s, want)
	}
}

// TestRxOneBuffer: without MRG_RXBUF each frame lands in one buffer after a
// zero header with num_buffers 1, used length = header + frame.
func TestRxOneBuffer(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.String(), func(t *testing.T) {
			g, q := rxCase(t, k, 0, 0, 0)
			rng := rand.New(rand.NewSource(1))
			var want [][]byte
			total := 0
			for i := 0; i < 40; i++ {
				g.post(HeaderLen + 1518)
			}
			f := &Frames{}
			for burst := 0; burst < 2; burst++ {
				f.Reset()
				for i := 0; i < 20; i++ {
					fr := frame(rng, 60+rng.Intn(1458))
					f.AddBytes(fr)
					want = append(want, fr)
					total += len(fr)
				}
				if n, err := q.Deliver(f); n != 20 || err != nil {
					t.Fatalf("Deliver = %d, %v", n, err)
				}
			}
			cs := checkReceived(t, g, false, want)
			for i, c := range cs {
				if int(c.n) != HeaderLen+len(want[i]) {
					t.Fatalf("used len %d, want %d", c.n, HeaderLen+len(want[i]))
				}
			}
			if q.Held() != 0 || g.ring.InFlight() != 0 {
				t.Fatalf("held %d, in flight %d", q.Held(), g.ring.InFlight())
			}
			checkStats(t, q.Snapshot(), 40, total, nil)
		})
	}
}

// TestRxMergeable: with MRG_RXBUF a 9000-byte frame spreads over 2 KiB
// buffers with num_buffers right, mixed with small frames, in order.
func TestRxMergeable(t *testing.T) {
	for _, k := range kinds {
		for _, inOrder := range []bool{false, true} {
			name := k.String()
			var rf uint64
			if inOrder {
				name += "/in-order"
				rf = 1 << virtq.FeatureInOrder
			}
			t.Run(name, func(t *testing.T) {
				g, q := rxCase(t, k, rf, featMrg, MaxFrameLen(9000))
				rng := rand.New(rand.NewSource(2))
				for i := 0; i < 64; i++ {
					g.post(2048)
				}
				sizes := []int{9000 + 18, 64, 9000, 2048 - HeaderLen, 2048 - HeaderLen + 1, 1500, 4096}
				var want [][]byte
				total := 0
				f := &Frames{}
				for _, n := range sizes {
					fr := frame(rng, n)
					want = append(want, fr)
					total += n
					f.AddBytes(fr)
				}
				if n, err := q.Deliver(f); n != len(sizes) || err != nil {
					t.Fatalf("Deliver = %d, %v", n, err)
				}
				cs := checkReceived(t, g, true, want)
				// 9018+12 bytes need 5 buffers, 9012 need 5, 2048 fits
				// one exactly, 2049 needs two.
				first := DecodeHeader(g.chainBytes(cs[0].id, HeaderLen))
				if first.NumBuffers != 5 {
					t.Fatalf("num_buffers %d, want 5", first.NumBuffers)
				}
				if len(cs) != 5+1+5+1+2+1+3 {
					t.Fatalf("%d buffers used", len(cs))
				}
				checkStats(t, q.Snapshot(), len(sizes), total, nil)
				if err := q.Flush(); err != nil {
					t.Fatal(err)
				}
				if g.ring.InFlight() != 0 {
					t.Fatalf("%d buffers still in flight after Flush", g.ring.InFlight())
				}
			})
		}
	}
}

// TestRxNoBuffers: frames for a guest without buffers are counted, and
// when buffers run out in the middle of a burst the rest are.
func TestRxNoBuffers(t *testing.T) {
	for _, k := range kinds {
		for _, mrg := range []uint64{0, featMrg} {
			t.Run(k.String()+map[uint64]string{0: "", featMrg: "/mrg"}[mrg], func(t *testing.T) {
				g, q := rxCase(t, k, 0, mrg, 0)
				rng := rand.New(rand.NewSource(3))
				var fs [][]byte
				for i := 0; i < 5; i++ {
					fs = append(fs, frame(rng, 1000))
				}
				if n, err := q.Deliver(framesOf(fs...)); n != 0 || err != nil {
					t.Fatalf("Deliver = %d, %v", n, err)
				}
				checkStats(t, q.Snapshot(), 0, 0, map[DropReason]int{DropNoRxBuffers: 5})
				for i := 0; i < 3; i++ {
					g.post(2048)
				}
				if n, err := q.Deliver(framesOf(fs...)); n != 3 || err != nil {
					t.Fatalf("Deliver = %d, %v", n, err)
				}
				checkReceived(t, g, mrg != 0, fs[:3])
				checkStats(t, q.Snapshot(), 3, 3000, map[DropReason]int{DropNoRxBuffers: 7})
				if q.Held() != 0 || g.ring.InFlight() != 0 {
					t.Fatalf("held %d, in flight %d", q.Held(), g.ring.InFlight())
				}
			})
		}
	}
}

// TestRxTooSmall: without MRG_RXBUF a buffer too small for its frame goes
// back unused and the frame is counted; the next frame takes the next
// buffer. Frames over MaxFrame are counted as too long and use nothing.
func TestRxTooSmall(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.String(), func(t *testing.T) {
			g, q := rxCase(t, k, 1<<virtq.FeatureInOrder, 0, 1518)
			rng := rand.New(rand.NewSource(4))
			small := g.post(100)
			big := g.post(2048)
			fs := [][]byte{frame(rng, 1500), frame(rng, 1519), frame(rng, 1500)}
			if n, err := q.Deliver(framesOf(fs...)); n != 1 || err != nil {
				t.Fatalf("Deliver = %d, %v", n, err)
			}
			cs := g.reap()
			if len(cs) != 2 || cs[0] != (completion{small, 0}) || cs[1].id != big {
				t.Fatalf("completions %+v", cs)
			}
			got, err := g.received(cs[1:], HeaderLen, false)
			if err != nil || !bytes.Equal(got[0], fs[2]) {
				t.Fatalf("frame not intact: %v", err)
			}
			checkStats(t, q.Snapshot(), 1, 1500, map[DropReason]int{DropGuestBufferTooSmall: 1, DropTooLong: 1})
		})
	}
}

// TestRxMergeableTooSmall: a frame needing more buffers than two bursts
// hold is counted as guest_buffer_too_small; the buffers stay for the
// frames after it, and Flush returns the rest unused.
func TestRxMergeableTooSmall(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.String(), func(t *testing.T) {
			g, q := rxCase(t, k, 1<<virtq.FeatureInOrder, featMrg, MaxFrameLen(9000))
			rng := rand.New(rand.NewSource(5))
			for i := 0; i < 100; i++ {
				g.post(64)
			}
			fs := [][]byte{frame(rng, 9000), frame(rng, 100), frame(rng, 9000), frame(rng, 60)}
			if n, err := q.Deliver(framesOf(fs...)); n != 2 || err != nil {
				t.Fatalf("Deliver = %d, %v", n, err)
			}
			checkReceived(t, g, true, [][]byte{fs[1], fs[3]})
			checkStats(t, q.Snapshot(), 2, 160, map[DropReason]int{DropGuestBufferTooSmall: 2})
			held := q.Held()
			if held == 0 || g.ring.InFlight() != held {
				t.Fatalf("held %d, ring in flight %d", held, g.ring.InFlight())
			}
			if err := q.Flush(); err != nil {
				t.Fatal(err)
			}
			cs := g.reap()
			for _, c := range cs {
				if c.n != 0 {
					t.Fatalf("flushed buffer with length %d", c.n)
				}
			}
			if len(cs) != held || g.ring.InFlight() != 0 || q.Held() != 0 {
				t.Fatalf("flushed %d of %d, ring in flight %d", len(cs), held, g.ring.InFlight())
			}
		})
	}
}

// TestRxMixedBufferSizes: with MRG_RXBUF and buffers of varying sizes (the
// estimate misses, leftovers carry over), a long random run delivers every
// frame intact and in order, and the counters balance.
func TestRxMixedBufferSizes(t *testing.T) {
	for _, k := range kinds {
		for _, inOrder := range []bool{false, true} {
			name := k.String()
			var rf uint64
			if inOrder {
				name += "/in-order"
				rf = 1 << virtq.FeatureInOrder
			}
			t.Run(name, func(t *testing.T) {
				g, q := rxCase(t, k, rf, featMrg, MaxFrameLen(9000))
				rng := rand.New(rand.NewSource(6))
				sizes := []uint32{HeaderLen - 2, 64, 512, 1536, 2048, 4096}
				offered, total := 0, 0
				var want [][]byte
				f := &Frames{}
				for round := 0; round < 60; round++ {
					for i := rng.Intn(40); i > 0 && len(g.chains) < 200; i-- {
						g.post(sizes[rng.Intn(len(sizes))])
					}
					f.Reset()
					var fs [][]byte
					for i := 1 + rng.Intn(32); i > 0; i-- {
						n := 14 + rng.Intn(1500)
						if rng.Intn(8) == 0 {
							n = 14 + rng.Intn(9004)
						}
						fr := frame(rng, n)
						fs = append(fs, fr)
						f.AddBytes(fr)
					}
					offered += len(fs)
					before := q.Snapshot()
					n, err := q.Deliver(f)
					if err != nil {
						t.Fatal(err)
					}
					after := q.Snapshot()
					lb := q.LastBurst()
					for r := range lb.Drops {
						if lb.Drops[r] != after.Drops[r]-before.Drops[r] {
							t.Fatalf("round %d: LastBurst %+v, snapshots %+v -> %+v", round, lb, before, after)
						}
					}
					if lb.Packets != after.Packets-before.Packets || lb.Bytes != after.Bytes-before.Bytes {
						t.Fatalf("round %d: LastBurst %+v, snapshots %+v -> %+v", round, lb, before, after)
					}
					if int(after.Packets-before.Packets) != n || int(after.Packets+after.Dropped()-before.Packets-before.Dropped()) != len(fs) {
						t.Fatalf("round %d: delivered %d of %d, stats %+v -> %+v", round, n, len(fs), before, after)
					}
					// Which frames arrived: the guest tells, by content.
					cs := g.reap()
					var nonEmpty []completion
					for _, c := range cs {
						if c.n != 0 {
							nonEmpty = append(nonEmpty, c)
						}
					}
					got, err := g.received(nonEmpty, HeaderLen, true)
					if err != nil {
						t.Fatalf("round %d: %v", round, err)
					}
					j := 0
					for _, fr := range fs {
						if j < len(got) && bytes.Equal(got[j], fr) {
							want = append(want, fr)
							total += len(fr)
							j++
						}
					}
					if j != len(got) || j != n {
						t.Fatalf("round %d: %d frames arrived, %d matched in order, %d reported", round, len(got), j, n)
					}
					g.release(cs)
				}
				s := q.Snapshot()
				if s.Packets+s.Dropped() != uint64(offered) || s.Packets != uint64(len(want)) || s.Bytes != uint64(total) {
					t.Fatalf("stats %+v for %d offered, %d delivered", s, offered, len(want))
				}
				t.Logf("stats %+v, held at the end %d", s, q.Held())
				if s.Packets == 0 || s.Drops[DropNoRxBuffers] == 0 {
					t.Fatalf("run exercised too little: %+v", s)
				}
				if err := q.Flush(); err != nil {
					t.Fatal(err)
				}
				g.release(g.reap())
				if g.ring.InFlight() != 0 {
					t.Fatalf("%d in flight after Flush", g.ring.InFlight())
				}
			})
		}
	}
}

// TestRxBrokenRing: a receive buffer outside guest memory breaks the ring:
// Deliver returns the ring's error, the frames are counted as ring_broken
// and the queue stays broken.
func TestRxBrokenRing(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.String(), func(t *testing.T) {
			g, q := rxCase(t, k, 0, featMrg, 0)
			rng := rand.New(rand.NewSource(7))
			g.post(2048)
			g.add([]buf{{Addr: 0x10, Len: 2048, Write: true}})
			fs := [][]byte{frame(rng, 1500), frame(rng, 1500), frame(rng, 1500)}
			n, err := q.Deliver(framesOf(fs...))
			if !errors.Is(err, virtq.ErrBadAddress) && !errors.Is(err, virtq.ErrBroken) {
				t.Fatalf("Deliver = %d, %v; want a bad-address ring error", n, err)
			}
			s := q.Snapshot()
			if s.Packets != uint64(n) || s.Packets+s.Drops[DropRingBroken] != 3 || s.Dropped() != s.Drops[DropRingBroken] {
				t.Fatalf("delivered %d, stats %+v", n, s)
			}
			if n2, err2 := q.Deliver(framesOf(fs...)); n2 != 0 || err2 != err {
				t.Fatalf("broken queue Deliver = %d, %v", n2, err2)
			}
			if s = q.Snapshot(); s.Packets+s.Drops[DropRingBroken] != 6 {
				t.Fatalf("stats %+v", s)
			}
		})
	}
}

// TestRxLegacyHeader: without VERSION_1 and MRG_RXBUF the header is 10
// bytes.
func TestRxLegacyHeader(t *testing.T) {
	g := newGuest(t, kindSplit, 64, 0)
	q := NewRxQueue(g.ring, QueueConfig{})
	fr := frame(rand.New(rand.NewSource(8)), 200)
	g.post(2048)
	if n, err := q.Deliver(framesOf(fr)); n != 1 || err != nil {
		t.Fatalf("Deliver = %d, %v", n, err)
	}
	cs := g.reap()
	if len(cs) != 1 || cs[0].n != LegacyHeaderLen+200 {
		t.Fatalf("completions %+v", cs)
	}
	got, err := g.received(cs, LegacyHeaderLen, false)
	if err != nil || !bytes.Equal(got[0], fr) {
		t.Fatalf("frame not intact: %v", err)
	}
}

// TestRxStopped: a queue without a ring counts frames as queue_stopped.
func TestRxStopped(t *testing.T) {
	q := NewRxQueue(nil, QueueConfig{Features: featV1})
	if n, err := q.Deliver(framesOf(make([]byte, 60), make([]byte, 60))); n != 0 || err != nil {
		t.Fatalf("Deliver = %d, %v", n, err)
	}
	checkStats(t, q.Snapshot(), 0, 0, map[DropReason]int{DropQueueStopped: 2})
}
