package virtionet

import (
	"bytes"
	"errors"
	"math/rand"
	"reflect"
	"testing"

	"github.com/xvswitch/xvswitch/virtq"
)

// gather concatenates a frame's segments.
func gather(f *Frames, i int) []byte {
	var out []byte
	for _, s := range f.Segments(i) {
		out = append(out, s...)
	}
	return out
}

// TestTxHeaderLayouts: wherever the guest puts the header, the frame comes
// out whole and exact, and every chain goes back with length 0.
func TestTxHeaderLayouts(t *testing.T) {
	for _, k := range kinds {
		for _, l := range layouts {
			t.Run(k.String()+"/"+l.String(), func(t *testing.T) {
				g := newGuest(t, k, 256, 0)
				q := NewTxQueue(g.ring, QueueConfig{Index: 1, Features: featV1})
				rng := rand.New(rand.NewSource(int64(l)))
				var sent [][]byte
				ids := map[uint16]bool{}
				for i := 0; i < 40; i++ {
					fr := frame(rng, 14+rng.Intn(1500))
					sent = append(sent, fr)
					ids[g.send(fr, HeaderLen, l)] = true
				}
				var got [][]byte
				for {
					n, err := q.Receive(virtq.MaxBurst)
					if err != nil {
						t.Fatal(err)
					}
					if n == 0 {
						break
					}
					f := q.Frames()
					if f.Len() != n {
						t.Fatalf("popped %d chains, %d frames", n, f.Len())
					}
					for i := 0; i < f.Len(); i++ {
						b := gather(f, i)
						if len(b) != f.FrameLen(i) {
							t.Fatalf("frame %d: FrameLen %d, segments hold %d", i, f.FrameLen(i), len(b))
						}
						got = append(got, b)
					}
					if err := q.Complete(); err != nil {
						t.Fatal(err)
					}
				}
				if len(got) != len(sent) {
					t.Fatalf("got %d frames, sent %d", len(got), len(sent))
				}
				bytesSent := 0
				for i := range sent {
					if !bytes.Equal(got[i], sent[i]) {
						t.Fatalf("frame %d differs (len %d vs %d)", i, len(got[i]), len(sent[i]))
					}
					bytesSent += len(sent[i])
				}
				for _, c := range g.reap() {
					if !ids[c.id] || c.n != 0 {
						t.Fatalf("completion %+v unexpected", c)
					}
					delete(ids, c.id)
				}
				if len(ids) != 0 || g.ring.InFlight() != 0 {
					t.Fatalf("%d chains not completed, ring in flight %d", len(ids), g.ring.InFlight())
				}
				s := q.Snapshot()
				if s.Packets != uint64(len(sent)) || s.Bytes != uint64(bytesSent) || s.Dropped() != 0 {
					t.Fatalf("stats %+v, want %d packets %d bytes", s, len(sent), bytesSent)
				}
			})
		}
	}
}

// TestTxRejects: malformed and too-long chains are counted by reason,
// completed like the others, and the good frames around them pass.
func TestTxRejects(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.String(), func(t *testing.T) {
			const mtu = 1500
			g, q := mtuTxQueue(t, k, mtu)
			rng := rand.New(rand.NewSource(1))
			good := [][]byte{frame(rng, 60), frame(rng, MaxFrameLen(mtu)), frame(rng, 14)}
			g.send(good[0], HeaderLen, hdrOwnDesc)
			g.add([]buf{{Addr: g.alloc(8), Len: 8}})                                                  // shorter than the header
			g.add([]buf{{Addr: g.alloc(HeaderLen), Len: HeaderLen}})                                  // header, no frame
			g.send(frame(rng, 13), HeaderLen, hdrCombined)                                            // runt
			g.add([]buf{{Addr: g.alloc(100), Len: 100}, {Addr: g.alloc(100), Len: 100, Write: true}}) // writable part
			g.send(good[1], HeaderLen, frameScatter)
			g.send(frame(rng, MaxFrameLen(mtu)+1), HeaderLen, hdrCombined) // too long
			g.send(frame(rng, 9000), HeaderLen, hdrOwnDesc)                // too long
			g.send(good[2], HeaderLen, hdrSplit)

			n, err := q.Receive(virtq.MaxBurst)
			if err != nil || n != 9 {
				t.Fatalf("Receive = %d, %v; want 9 chains", n, err)
			}
			f := q.Frames()
			if f.Len() != len(good) {
				t.Fatalf("%d frames, want %d", f.Len(), len(good))
			}
			for i := range good {
				if !bytes.Equal(gather(f, i), good[i]) {
					t.Fatalf("frame %d differs", i)
				}
			}
			if err := q.Complete(); err != nil {
				t.Fatal(err)
			}
			if cs := g.reap(); len(cs) != 9 {
				t.Fatalf("%d completions, want 9", len(cs))
			}
			s := q.Snapshot()
			if lb := q.LastBurst(); lb != s {
				t.Fatalf("LastBurst %+v differs from the only burst's totals %+v", lb, s)
			}
			want := Stats{Packets: 3, Bytes: uint64(60 + MaxFrameLen(mtu) + 14)}
			want.Drops[DropMalformed] = 4
			want.Drops[DropTooLong] = 2
			s.Notifies = 0
			if s != want {
				t.Fatalf("stats %+v, want %+v", s, want)
			}
		})
	}
}

// TestTxReceiveCompletesPending: a Receive without Complete first
// completes the pending burst, so chains never leak.
func TestTxReceiveCompletesPending(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.String(), func(t *testing.T) {
			g := newGuest(t, k, 64, 1<<virtq.FeatureInOrder)
			q := NewTxQueue(g.ring, QueueConfig{Index: 1, Features: featV1})
			rng := rand.New(rand.NewSource(2))
			for i := 0; i < 5; i++ {
				g.send(frame(rng, 100), HeaderLen, hdrCombined)
			}
			if n, err := q.Receive(3); n != 3 || err != nil {
				t.Fatalf("Receive = %d, %v", n, err)
			}
			if n, err := q.Receive(3); n != 2 || err != nil {
				t.Fatalf("second Receive = %d, %v", n, err)
			}
			if len(g.reap()) != 3 {
				t.Fatal("first burst not completed by the second Receive")
			}
			if err := q.Complete(); err != nil {
				t.Fatal(err)
			}
			if len(g.reap()) != 2 || g.ring.InFlight() != 0 {
				t.Fatal("second burst not completed")
			}
		})
	}
}

// TestTxBrokenRing: a chain pointing outside guest memory breaks the ring;
// the queue reports the ring's error, counts the chains as ring_broken and
// stays broken.
func TestTxBrokenRing(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.String(), func(t *testing.T) {
			g := newGuest(t, k, 64, 0)
			q := NewTxQueue(g.ring, QueueConfig{Index: 3, Features: featV1})
			rng := rand.New(rand.NewSource(3))
			g.send(frame(rng, 100), HeaderLen, hdrCombined)
			if n, err := q.Receive(virtq.MaxBurst); n != 1 || err != nil {
				t.Fatalf("Receive = %d, %v", n, err)
			}
			if err := q.Complete(); err != nil {
				t.Fatal(err)
			}
			g.add([]buf{{Addr: 0x10, Len: 100}}) // below every region
			_, err := q.Receive(virtq.MaxBurst)
			if !errors.Is(err, virtq.ErrBadAddress) && !errors.Is(err, virtq.ErrBroken) {
				t.Fatalf("Receive error %v, want a bad-address ring error", err)
			}
			if q.Err() == nil {
				t.Fatal("queue not marked broken")
			}
			g.send(frame(rng, 100), HeaderLen, hdrCombined)
			if n, err2 := q.Receive(virtq.MaxBurst); n != 0 || err2 != err {
				t.Fatalf("broken queue Receive = %d, %v", n, err2)
			}
			s := q.Snapshot()
			if s.Packets != 1 || s.Dropped() != s.Drops[DropRingBroken] {
				t.Fatalf("stats %+v", s)
			}
		})
	}
}

// TestTxShortWayBoundaries: Receive's short way (one readable buffer,
// header and frame together, no offloads) takes exactly the frames the
// general way takes, at the edges of what passes: the shortest frame (an
// Ethernet header) and the longest (the MTU's) pass, one byte less or
// more is dropped by the general way with its reason, and the frames
// around them come out whole, in order, with their lengths counted.
func TestTxShortWayBoundaries(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.String(), func(t *testing.T) {
			const mtu = 1500
			g, q := mtuTxQueue(t, k, mtu)
			rng := rand.New(rand.NewSource(2))
			shortest, longest := frame(rng, EthHeaderLen), frame(rng, MaxFrameLen(mtu))
			g.send(frame(rng, EthHeaderLen-1), HeaderLen, hdrCombined)
			g.send(shortest, HeaderLen, hdrCombined)
			g.send(frame(rng, MaxFrameLen(mtu)+1), HeaderLen, hdrCombined)
			g.send(longest, HeaderLen, hdrCombined)
			g.add([]buf{{Addr: g.alloc(HeaderLen), Len: HeaderLen}})
			if n, err := q.Receive(virtq.MaxBurst); err != nil || n != 5 {
				t.Fatalf("Receive = %d, %v; want 5 chains", n, err)
			}
			f := q.Frames()
			if f.Len() != 2 || !bytes.Equal(gather(f, 0), shortest) || !bytes.Equal(gather(f, 1), longest) {
				t.Fatalf("%d frames, want the shortest and the longest, whole", f.Len())
			}
			if f.FrameLen(0) != len(shortest) || f.FrameLen(1) != len(longest) {
				t.Fatalf("frame lengths %d, %d; want %d, %d", f.FrameLen(0), f.FrameLen(1), len(shortest), len(longest))
			}
			want := Stats{Packets: 2, Bytes: uint64(len(shortest) + len(longest))}
			want.Drops[DropMalformed] = 2
			want.Drops[DropTooLong] = 1
			s := q.Snapshot()
			s.Notifies = 0
			if s != want {
				t.Fatalf("stats %+v, want %+v", s, want)
			}
		})
	}
}

// TestTxShortWayOffloadGuest: from a guest that negotiated offloads the
// short way takes a one-buffer chain only behind a header whose offload
// bytes are all zero, and whatever it takes comes out exactly as the
// general way gives the same frame behind the same header in a chain it
// does not take (the header in a descriptor of its own): the frames, their
// lengths and metadata, and the drops. A header that asks for no offload
// (noise in the unused fields, DATA_VALID) is a plain frame's either way;
// one with NEEDS_CSUM or a GSO type goes the general way.
func TestTxShortWayOffloadGuest(t *testing.T) {
	const mtu = 1500
	headers := []Header{{}, {HdrLen: 14}, {CsumOffset: 6}, {CsumStart: 34}, {GSOSize: 1448}, {Flags: 2},
		{Flags: FlagNeedsCsum, CsumStart: 34, CsumOffset: 6}, {Flags: FlagNeedsCsum | 2, CsumStart: 34, CsumOffset: 6},
		{GSOType: GSOTCPv4, GSOSize: 1448}, {GSOType: GSOECN}}
	for _, k := range kinds {
		t.Run(k.String(), func(t *testing.T) {
			rng := rand.New(rand.NewSource(3))
			lens := []int{EthHeaderLen - 1, EthHeaderLen, 60, MaxFrameLen(mtu), MaxFrameLen(mtu) + 1}
			var frames [][]byte
			for _, n := range lens {
				frames = append(frames, frame(rng, n))
			}
			run := func(l txLayout, h Header) ([][]byte, []Offload, Stats) {
				g := newGuest(t, k, 64, 0)
				q := NewTxQueue(g.ring, QueueConfig{Index: 1, Features: featV1 | featOffloads, MaxFrame: MaxFrameLen(mtu)})
				for _, fr := range frames {
					g.sendWithHeader(h, fr, l)
				}
				if n, err := q.Receive(virtq.MaxBurst); err != nil || n != len(frames) {
					t.Fatalf("Receive = %d, %v", n, err)
				}
				f := q.Frames()
				var got [][]byte
				var offs []Offload
				for i := 0; i < f.Len(); i++ {
					got = append(got, gather(f, i))
					offs = append(offs, f.Offload(i))
				}
				s := q.Snapshot()
				s.Notifies = 0
				return got, offs, s
			}
			for _, h := range headers {
				short, shortOff, shortStats := run(hdrCombined, h)
				general, generalOff, generalStats := run(hdrOwnDesc, h)
				if !reflect.DeepEqual(short, general) || !reflect.DeepEqual(shortOff, generalOff) || shortStats != generalStats {
					t.Fatalf("header %+v: one buffer gave %d frames %v, %+v; the general way %d frames %v, %+v",
						h, len(short), shortOff, shortStats, len(general), generalOff, generalStats)
				}
				if h == (Header{}) && len(short) != 3 {
					t.Fatalf("plain header: %d frames, want the 3 of 14 to %d bytes", len(short), MaxFrameLen(mtu))
				}
			}
		})
	}
}

// mtuTxQueue is a TX queue of a 64-descriptor ring whose guest has an MTU
// of mtu, and its guest.
func mtuTxQueue(t *testing.T, k ringKind, mtu int) (*guest, *TxQueue) {
	g := newGuest(t, k, 64, 0)
	return g, NewTxQueue(g.ring, QueueConfig{Index: 1, Features: featV1, MaxFrame: MaxFrameLen(mtu)})
}
