package virtionet

import (
	"bytes"
	"math/rand"
	"testing"
)

// TestRxLend: buffers lent out and completed out of order, interleaved
// with Deliver's own, arrive with a header and the right lengths; a small
// buffer stops lending and stays Deliver's; abandoned lent buffers come
// back empty; counters balance; lending allocates nothing.
func TestRxLend(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.String(), func(t *testing.T) {
			g, q := rxCase(t, k, 0, 1<<FeatureMrgRxbuf, 0)
			rng := rand.New(rand.NewSource(2))
			for i := 0; i < 8; i++ {
				g.post(1536)
			}
			var out [16]LentBuffer
			n, stop := q.LendBuffers(out[:], 1536, 0)
			if n != 8 || stop != LendOK || q.Held() != 8 || q.Lent() != 8 {
				t.Fatalf("lent %d (%v), held %d", n, stop, q.Held())
			}
			// The "kernel" writes frames into buffers 5, 2 and 7.
			want := map[uint16][]byte{}
			var done []LentDone
			for _, i := range []int{5, 2, 7} {
				fr := frame(rng, 60+rng.Intn(1400))
				copy(out[i].Buf[HeaderLen:], fr)
				want[out[i].ID] = fr
				done = append(done, LentDone{ID: out[i].ID, Len: len(fr)})
			}
			// A frame Deliver copies needs a buffer of its own.
			g.post(1536)
			flood := frame(rng, 100)
			if d, err := q.Deliver(framesOf(flood)); d != 1 || err != nil {
				t.Fatalf("Deliver = %d, %v", d, err)
			}
			if d, err := q.CompleteLent(done); d != 3 || err != nil {
				t.Fatalf("CompleteLent = %d, %v", d, err)
			}
			cs := g.reap()
			if len(cs) != 4 {
				t.Fatalf("%d completions, want 4", len(cs))
			}
			for _, c := range cs {
				fr, ok := want[c.id]
				if !ok {
					fr = flood
				}
				got, err := g.received([]completion{c}, HeaderLen, true)
				if err != nil || len(got) != 1 || !bytes.Equal(got[0], fr) || int(c.n) != HeaderLen+len(fr) {
					t.Fatalf("buffer %d: len %d, err %v", c.id, c.n, err)
				}
			}
			// Completing one again is a drop, not a second use.
			if d, _ := q.CompleteLent(done[:1]); d != 0 {
				t.Fatalf("a done completed twice")
			}
			// A small buffer stops lending and is Deliver's.
			g.post(1536)
			g.post(512)
			g.post(1536)
			n, stop = q.LendBuffers(out[:], 1536, 0)
			if n != 1 || stop != LendUnfit || q.Lent() != 6 {
				t.Fatalf("lent %d (%v), lent in all %d", n, stop, q.Lent())
			}
			small := frame(rng, 200)
			if d, err := q.Deliver(framesOf(small)); d != 1 || err != nil {
				t.Fatalf("Deliver into the small buffer = %d, %v", d, err)
			}
			// Abandoned: the next call gives every lent buffer back empty.
			q.AbandonLent()
			if err := q.Flush(); err != nil {
				t.Fatal(err)
			}
			empty := 0
			for _, c := range g.reap() {
				if c.n == 0 {
					empty++
				}
			}
			// 6 lent + the 1536 left behind the small one (Flush's).
			if empty != 7 || q.Held() != 0 || g.ring.InFlight() != 0 {
				t.Fatalf("%d empty, held %d, in flight %d", empty, q.Held(), g.ring.InFlight())
			}
			s := q.Snapshot()
			if s.Packets != 5 || s.Drops[DropQueueStopped] != 1 {
				t.Fatalf("stats %+v", s)
			}
		})
	}
}

// TestRxLendAllocs: lending and completing allocate nothing once the table
// knows the ring's IDs.
func TestRxLendAllocs(t *testing.T) {
	g, q := rxCase(t, kindPacked, 0, 1<<FeatureMrgRxbuf, 0)
	var out [32]LentBuffer
	var done [32]LentDone
	// Warm up with as many buffers lent at once as the measured runs
	// have (64), so that the table knows every ID they get.
	for c := 0; c < 10; c++ {
		for i := 0; i < 64; i++ {
			g.post(1536)
		}
		for half := 0; half < 2; half++ {
			n, _ := q.LendBuffers(out[:], 1536, 0)
			for i := 0; i < n; i++ {
				done[i] = LentDone{ID: out[n-1-i].ID, Len: 60}
			}
			if half == 1 {
				_, _ = q.CompleteLent(done[:n])
			}
		}
		q.AbandonLent()
		_ = q.Flush()
		g.release(g.reap())
	}
	for i := 0; i < 64; i++ {
		g.post(1536) // for the warm-up run and the measured one
	}
	allocs := testing.AllocsPerRun(1, func() {
		n, _ := q.LendBuffers(out[:], 1536, 0)
		if n != 32 {
			t.Fatalf("lent %d, want 32", n)
		}
		for i := 0; i < n; i++ {
			done[i] = LentDone{ID: out[n-1-i].ID, Len: 60}
		}
		_, _ = q.CompleteLent(done[:n])
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per lend+complete burst", allocs)
	}
}

// TestRxLendStopped: a stopped queue lends nothing.
func TestRxLendStopped(t *testing.T) {
	q := NewRxQueue(nil, QueueConfig{Features: featV1})
	var out [4]LentBuffer
	if n, stop := q.LendBuffers(out[:], 1536, 0); n != 0 || stop != LendStopped {
		t.Fatalf("lent %d (%v) on a stopped queue", n, stop)
	}
}

// TestRxLendLogging: nothing is lent while the front-end logs dirty pages
// (the kernel's writes would bypass the log); Deliver, which logs, gets
// the buffers.
func TestRxLendLogging(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.String(), func(t *testing.T) {
			g, _ := newLoggedGuest(t, k, 64)
			q := NewRxQueue(g.ring, QueueConfig{Features: featV1 | 1<<FeatureMrgRxbuf})
			g.post(1536)
			var out [4]LentBuffer
			if n, stop := q.LendBuffers(out[:], 1536, 0); n != 0 || stop != LendLogging {
				t.Fatalf("lent %d (%v) while logging", n, stop)
			}
			if d, err := q.Deliver(framesOf(frame(rand.New(rand.NewSource(3)), 100))); d != 1 || err != nil {
				t.Fatalf("Deliver = %d, %v", d, err)
			}
		})
	}
}

// TestRxLendKeeps: lending leaves keep popped buffers to Deliver when the
// guest posts few (here fewer than its ring holds), takes the rest, and
// takes more once the guest posts more; Deliver's frames land in the kept
// buffers.
func TestRxLendKeeps(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.String(), func(t *testing.T) {
			g, q := rxCase(t, k, 0, 1<<FeatureMrgRxbuf, 0)
			rng := rand.New(rand.NewSource(4))
			for i := 0; i < 40; i++ {
				g.post(1536)
			}
			var out [64]LentBuffer
			n, stop := q.LendBuffers(out[:], 1536, 32)
			if n != 8 || stop != LendOK || q.Held() != 40 || q.Lent() != 8 {
				t.Fatalf("lent %d (%v) of 40 keeping 32, held %d", n, stop, q.Held())
			}
			// Nothing more to lend while only the kept are held.
			if n, stop := q.LendBuffers(out[:], 1536, 32); n != 0 || stop != LendOK {
				t.Fatalf("lent %d (%v) more with only the kept held", n, stop)
			}
			var frs [][]byte
			for i := 0; i < 32; i++ {
				frs = append(frs, frame(rng, 60+rng.Intn(1400)))
			}
			if d, err := q.Deliver(framesOf(frs...)); d != 32 || err != nil {
				t.Fatalf("Deliver into the kept buffers = %d, %v", d, err)
			}
			got, err := g.received(g.reap(), HeaderLen, true)
			if err != nil || len(got) != 32 {
				t.Fatalf("received %d, %v", len(got), err)
			}
			for i := range got {
				if !bytes.Equal(got[i], frs[i]) {
					t.Fatalf("frame %d differs", i)
				}
			}
			// The guest posts 50 more: 32 are kept again, 18 lent.
			for i := 0; i < 50; i++ {
				g.post(1536)
			}
			n, _ = q.LendBuffers(out[:], 1536, 32)
			if n != 18 || q.Lent() != 26 || q.Held() != 58 {
				t.Fatalf("lent %d of 50 more, lent in all %d, held %d", n, q.Lent(), q.Held())
			}
		})
	}
}
