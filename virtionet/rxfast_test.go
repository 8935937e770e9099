package virtionet

import (
	"bytes"
	"math/rand"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/xvswitch/xvswitch/virtq"
)

// TestRxFaultInFastRun: a run of single-buffer frames whose third buffer
// sits in memory whose file was truncated. The fault unwinds the run's
// first pass; nothing of the run reaches the used ring and all of it counts
// as memory_fault. Through placeRun (the packed ring with IN_ORDER) the
// buffers stay held and Flush returns them unused, and the next Deliver
// goes into fresh buffers; through a ring's Fill (packed, split) nothing
// was popped, so once the memory is back (the file grown again) the next
// Deliver goes into the same buffers. Either way that Deliver is whole.
func TestRxFaultInFastRun(t *testing.T) {
	type variant struct {
		kind    ringKind
		inOrder bool
	}
	for _, v := range []variant{{kindPacked, false}, {kindPacked, true}, {kindSplit, false}} {
		for _, mrg := range []bool{true, false} {
			name := v.kind.String() + map[bool]string{true: "/in-order"}[v.inOrder] + map[bool]string{true: "/mrg"}[mrg]
			t.Run(name, func(t *testing.T) {
				m, fds := sharedMem(t, 1<<20, 1<<20, 1<<20)
				var feat, ringFeat uint64
				if mrg {
					feat = featMrg
				}
				if v.inOrder {
					ringFeat = 1 << virtq.FeatureInOrder
				}
				g := newGuestOn(t, m, v.kind, 64, ringFeat)
				q := NewRxQueue(g.ring, QueueConfig{Features: featV1 | feat | ringFeat})
				filled := q.filler != nil && !v.inOrder
				ids := []uint16{g.post(2048), g.post(2048),
					g.add([]buf{{Addr: m.Alloc(2, 2048, 64), Len: 2048, Write: true}}), // doomed
					g.post(2048)}
				rng := rand.New(rand.NewSource(5))
				fs := [][]byte{frame(rng, 100), frame(rng, 100), frame(rng, 100), frame(rng, 100)}
				if err := unix.Ftruncate(fds[2], 0); err != nil {
					t.Fatal(err)
				}
				if r := deliverFault(q, framesOf(fs...)); !isMemoryFault(r) {
					t.Fatalf("Deliver unwound with %v, want a memory fault", r)
				}
				held := 4
				if filled {
					held = 0
				}
				if q.Held() != held {
					t.Fatalf("%d buffers held after the fault, want %d", q.Held(), held)
				}
				if err := q.Flush(); err != nil {
					t.Fatal(err)
				}
				cs := g.reap()
				if len(cs) != held {
					t.Fatalf("%d buffers used after the flush, want %d", len(cs), held)
				}
				for i, c := range cs {
					if c.id != ids[i] || c.n != 0 {
						t.Fatalf("used %d: buffer %d with %d bytes, want buffer %d unused", i, c.id, c.n, ids[i])
					}
				}
				checkStats(t, q.Snapshot(), 0, 0, map[DropReason]int{DropMemoryFault: 4})
				if filled {
					if err := unix.Ftruncate(fds[2], 1<<20); err != nil {
						t.Fatal(err)
					}
				} else {
					for i := 0; i < 4; i++ {
						g.post(2048)
					}
				}
				if n, err := q.Deliver(framesOf(fs...)); n != 4 || err != nil {
					t.Fatalf("Deliver after the fault: %d, %v", n, err)
				}
				cs = g.reap()
				if filled {
					for i, c := range cs {
						if c.id != ids[i] {
							t.Fatalf("used %d: buffer %d, want %d", i, c.id, ids[i])
						}
					}
				}
				got, err := g.received(cs, HeaderLen, mrg)
				if err != nil || len(got) != 4 {
					t.Fatalf("received %d frames: %v", len(got), err)
				}
				for i := range got {
					if !bytes.Equal(got[i], fs[i]) {
						t.Fatalf("frame %d differs", i)
					}
				}
			})
		}
	}
}

// TestRxFastRunMixed: frames the fast path takes and frames it leaves to
// the general one (two segments, too long, a buffer too small, a buffer of
// two descriptors), interleaved: every frame that fits arrives intact and
// in order, every other is counted with its reason.
func TestRxFastRunMixed(t *testing.T) {
	for _, k := range kinds {
		for _, mrg := range []bool{true, false} {
			t.Run(k.String()+map[bool]string{true: "/mrg"}[mrg], func(t *testing.T) {
				var feat uint64
				if mrg {
					feat = featMrg
				}
				g, q := rxCase(t, k, 0, feat, 1500)
				rng := rand.New(rand.NewSource(6))
				small := frame(rng, 60)
				two := frame(rng, 300)
				f := &Frames{}
				f.AddBytes(frame(rng, 200))
				f.Add([][]byte{two[:100], two[100:]})
				f.AddBytes(frame(rng, 1600)) // too long
				f.AddBytes(frame(rng, 1000)) // a buffer of two descriptors
				f.AddBytes(small)            // one of two descriptors, a header-sized first
				f.AddBytes(frame(rng, 64))
				f.AddBytes(frame(rng, 700)) // a 512-byte buffer: too small, or two merged
				g.post(2048)
				g.post(2048)
				g.post(512, 512)
				g.add([]buf{{Addr: g.alloc(16), Len: 16, Write: true}, {Addr: g.alloc(1024), Len: 1024, Write: true}})
				g.post(2048)
				g.post(512)
				want := [][]byte{f.Segments(0)[0], two, f.Segments(3)[0], small, f.Segments(5)[0]}
				drops := map[DropReason]int{DropTooLong: 1}
				if mrg {
					g.post(512)
					want = append(want, f.Segments(6)[0])
				} else {
					drops[DropGuestBufferTooSmall] = 1
				}
				n, err := q.Deliver(f)
				if err != nil || n != len(want) {
					t.Fatalf("Deliver: %d, %v; want %d", n, err, len(want))
				}
				// A buffer too small comes back unused (length 0).
				var cs []completion
				for _, c := range g.reap() {
					if c.n != 0 {
						cs = append(cs, c)
					}
				}
				nonEmpty, err := g.received(cs, HeaderLen, mrg)
				if err != nil {
					t.Fatal(err)
				}
				bytesIn := 0
				if len(nonEmpty) != len(want) {
					t.Fatalf("received %d frames, want %d", len(nonEmpty), len(want))
				}
				for i := range want {
					if !bytes.Equal(nonEmpty[i], want[i]) {
						t.Fatalf("frame %d: %d bytes, want %d", i, len(nonEmpty[i]), len(want[i]))
					}
					bytesIn += len(want[i])
				}
				checkStats(t, q.Snapshot(), len(want), bytesIn, drops)
			})
		}
	}
}

// TestRxFastHeaderOverStale: placeRun writes a buffer's header only when
// the buffer does not hold it already (virtq.FillHead.Put). A buffer
// recycled with a stale header of another frame (every byte 0xff, or a
// num_buffers of 3 and offload fields), a zeroed one and one already
// holding the right header must all come back with exactly the header of a
// plain frame, the frame behind it intact.
func TestRxFastHeaderOverStale(t *testing.T) {
	stale := map[string][]byte{
		"ones":  bytes.Repeat([]byte{0xff}, HeaderLen),
		"zero":  make([]byte, HeaderLen),
		"other": {1, 0, 14, 0, 0, 0, 34, 0, 16, 0, 3, 0},
	}
	for _, k := range kinds {
		for _, mrg := range []bool{true, false} {
			t.Run(k.String()+map[bool]string{true: "/mrg"}[mrg], func(t *testing.T) {
				var feat uint64
				if mrg {
					feat = featMrg
				}
				g, q := rxCase(t, k, 0, feat, 1500)
				rng := rand.New(rand.NewSource(7))
				// The right header, as a first Deliver writes it.
				g.post(2048)
				if n, err := q.Deliver(framesOf(frame(rng, 64))); n != 1 || err != nil {
					t.Fatalf("Deliver: %d, %v", n, err)
				}
				cs := g.reap()
				want := append([]byte(nil), g.chainBytes(cs[0].id, HeaderLen)...)
				stale["right"] = want
				var fs [][]byte
				for _, h := range stale {
					addr := g.alloc(2048)
					b := g.m.Bytes(addr, 2048)
					clear(b)
					copy(b, h)
					g.add([]buf{{Addr: addr, Len: 2048, Write: true}})
					fs = append(fs, frame(rng, 64))
				}
				if n, err := q.Deliver(framesOf(fs...)); n != len(fs) || err != nil {
					t.Fatalf("Deliver: %d, %v", n, err)
				}
				cs = g.reap()
				if len(cs) != len(fs) {
					t.Fatalf("%d buffers used, want %d", len(cs), len(fs))
				}
				for i, c := range cs {
					data := g.chainBytes(c.id, c.n)
					if c.n != HeaderLen+64 || !bytes.Equal(data[:HeaderLen], want) || !bytes.Equal(data[HeaderLen:], fs[i]) {
						t.Errorf("buffer %d: %d bytes, header % x, want % x and the frame", i, c.n, data[:min(len(data), HeaderLen)], want)
					}
				}
			})
		}
	}
}
