package split_test

import (
	"errors"
	"testing"

	"github.com/xvswitch/xvswitch/split"
	"github.com/xvswitch/xvswitch/virtq"
	"github.com/xvswitch/xvswitch/virtq/drivertest"
)

// Tests of the split ring's one-pass transmit path (take.go): what a Take
// pops is what Pop would have popped, in flight until a Push of its Used
// entries, and what it does not take is left for Pop as it was.

// send adds one readable buffer of ln bytes at addr and returns its head.
func (e *fillEnv) send(addr uint64, ln uint32) uint16 {
	e.t.Helper()
	h, err := e.d.AddChain([]drivertest.SplitBuf{{Addr: addr, Len: ln}}, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	e.d.Publish()
	return h
}

// wantTaken checks that the first len(addrs) entries of j are the buffers
// of heads at addrs, n bytes each, used with length 0.
func (e *fillEnv) wantTaken(j *virtq.TakeJob, heads []uint16, addrs []uint64, n uint64) {
	e.t.Helper()
	for i, a := range addrs {
		want := e.m.Bytes(a, n)
		if b := j.Bufs[i]; len(b) != len(want) || &b[0] != &want[0] {
			e.t.Fatalf("taken %d: %d bytes at %p, want %d at %p (guest %#x)", i, len(b), b, len(want), want, a)
		}
		if u := j.Used[i]; u != (virtq.Used{ID: heads[i], Descs: 1}) {
			e.t.Fatalf("taken %d: used %+v, want head %d, length 0", i, u, heads[i])
		}
	}
}

// wantReaped checks that the driver reaps heads, in order, with length 0.
func (e *fillEnv) wantReaped(heads []uint16) {
	e.t.Helper()
	for i, h := range heads {
		u, ok, err := e.d.Reap()
		if !ok || err != nil || u.ID != h || u.Len != 0 {
			e.t.Fatalf("used %d: %+v (%v, %v), want head %d length 0", i, u, ok, err, h)
		}
	}
	if _, ok, _ := e.d.Reap(); ok {
		e.t.Fatal("more used elements than buffers")
	}
}

// TestSplitTakeRounds: rounds of Takes over a ring of 8, some asking for
// more than there is, round the ring many times, every third round popped
// instead: every buffer is taken in order and returned by a Push of its
// Used entry.
func TestSplitTakeRounds(t *testing.T) {
	e := newFillEnv(t, 8)
	var j virtq.TakeJob
	next := 0
	for round := 0; round < 40; round++ {
		m := 1 + round%8
		var heads []uint16
		var addrs []uint64
		for i := 0; i < m; i++ {
			a := e.buf + uint64(next%64)*256
			next++
			heads = append(heads, e.send(a, 256))
			addrs = append(addrs, a)
		}
		var used []virtq.Used
		if round%3 == 2 {
			var b virtq.Burst
			n, err := e.r.Pop(&b, 32)
			if n != m || err != nil {
				t.Fatalf("round %d: popped %d (%v) of %d", round, n, err, m)
			}
			for i := range n {
				used = append(used, virtq.Used{ID: b.Chains[i].ID, Descs: 1})
			}
		} else {
			n := e.r.Take(&j, m+round%3)
			if n != m || e.r.InFlight() != m || j.More {
				t.Fatalf("round %d: took %d (%d in flight, more %v) of %d buffers", round, n, e.r.InFlight(), j.More, m)
			}
			e.wantTaken(&j, heads, addrs, 256)
			used = j.Used[:n]
		}
		if err := e.r.Push(used); err != nil {
			t.Fatalf("round %d: Push: %v", round, err)
		}
		e.wantReaped(heads)
		if e.r.InFlight() != 0 {
			t.Fatalf("round %d: %d in flight after the Push", round, e.r.InFlight())
		}
	}
}

// TestSplitTakeStops: two buffers Take takes, then one it must not: Take
// pops two and leaves the third to Pop, which takes it (or fails the ring
// for what is wrong with it).
func TestSplitTakeStops(t *testing.T) {
	for _, tc := range []struct {
		name string
		add  func(e *fillEnv) // the third entry
		want error
	}{
		{"chain of two", func(e *fillEnv) {
			if _, err := e.d.AddChain([]drivertest.SplitBuf{{Addr: e.buf, Len: 64}, {Addr: e.buf + 64, Len: 64}}, nil); err != nil {
				e.t.Fatal(err)
			}
		}, nil},
		{"indirect", func(e *fillEnv) {
			if _, err := e.d.AddChain(nil, []drivertest.SplitBuf{{Addr: e.buf, Len: 256}}); err != nil {
				e.t.Fatal(err)
			}
		}, nil},
		{"writable", func(e *fillEnv) { e.post(e.buf, 256) }, nil},
		{"length zero", func(e *fillEnv) {
			e.d.WriteDesc(15, e.buf, 0, 0, 0)
			e.d.WriteAvail(e.d.AvailIdx(), 15)
		}, nil},
		{"head out of range", func(e *fillEnv) { e.d.WriteAvail(e.d.AvailIdx(), 16) }, virtq.ErrBadID},
		{"head taken in this run", func(e *fillEnv) { e.d.WriteAvail(e.d.AvailIdx(), 0) }, virtq.ErrBadID},
		{"outside guest memory", func(e *fillEnv) {
			e.d.WriteDesc(15, e.buf+(1<<20)-8, 256, 0, 0)
			e.d.WriteAvail(e.d.AvailIdx(), 15)
		}, virtq.ErrBadAddress},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newFillEnv(t, 16)
			addrs := []uint64{e.buf + 4096, e.buf + 8192}
			heads := []uint16{e.send(addrs[0], 256), e.send(addrs[1], 256)}
			if heads[0] != 0 {
				t.Fatalf("first head %d: the case %q needs 0", heads[0], "head taken in this run")
			}
			tc.add(e)
			if idx := heads2idx(e); tc.name == "head taken in this run" {
				e.d.PublishIdx(idx + 1) // its raw entry is head 0
			} else {
				e.d.PublishIdx(idx)
			}
			var j virtq.TakeJob
			if n := e.r.Take(&j, 4); n != 2 || e.r.InFlight() != 2 || !j.More {
				t.Fatalf("Take popped %d (%d in flight, more %v), want 2 and more", n, e.r.InFlight(), j.More)
			}
			e.wantTaken(&j, heads, addrs, 256)
			var b virtq.Burst
			n, err := e.r.Pop(&b, 32)
			if !errors.Is(err, tc.want) || (tc.want == nil && n != 1) {
				t.Fatalf("Pop after Take: %d, %v; want 1 chain or %v", n, err, tc.want)
			}
		})
	}
}

// TestSplitTakeOff: a broken ring takes nothing; a ReadOnly ring (a
// transmit queue's) ignores WRITE flags, so Take takes those buffers, as
// Pop does.
func TestSplitTakeOff(t *testing.T) {
	var j virtq.TakeJob
	e := newFillEnv(t, 8)
	e.d.PublishIdx(9)
	var b virtq.Burst
	if _, err := e.r.Pop(&b, 32); !errors.Is(err, virtq.ErrBadIndex) {
		t.Fatal(err)
	}
	if n := e.r.Take(&j, 4); n != 0 || !j.More {
		t.Fatalf("broken ring: Take popped %d (more %v), want 0 and Pop to say why", n, j.More)
	}

	e = newFillEnv(t, 8)
	cfg := e.d.Config(featAll)
	cfg.ReadOnly = true
	var err error
	if e.r, err = split.New(cfg); err != nil {
		t.Fatal(err)
	}
	heads := []uint16{e.post(e.buf, 256), e.post(e.buf+256, 256)}
	if n := e.r.Take(&j, 4); n != 2 {
		t.Fatalf("ReadOnly ring: Take popped %d of 2 writable-flagged buffers", n)
	}
	e.wantTaken(&j, heads, []uint64{e.buf, e.buf + 256}, 256)
}

// TestHostileTakeFirst: every hostile case of TestHostile, with a Take
// before the Pop: the ring fails with the case's error either way.
func TestHostileTakeFirst(t *testing.T) {
	for _, tc := range hostileCases() {
		t.Run(tc.name, func(t *testing.T) {
			h, r := newHostileRing(t, tc.size, tc.features)
			if bad := tc.setup(h); bad >= 0 {
				h.d.WriteAvail(0, uint16(bad))
				h.d.PublishIdx(1)
			}
			if tc.name == "head already in flight" {
				h.popHeadFirst(t, r)
			}
			var j virtq.TakeJob
			r.Take(&j, virtq.MaxBurst)
			var b virtq.Burst
			if _, err := r.Pop(&b, virtq.MaxBurst); !errors.Is(err, tc.want) {
				t.Fatalf("Take then Pop: %v, want %v", err, tc.want)
			}
		})
	}
}
