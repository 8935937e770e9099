package packed_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/xvswitch/xvswitch/virtq"
	"github.com/xvswitch/xvswitch/virtq/drivertest"
)

// Tests of the one-pass transmit path (take.go). What a Take pops must be
// what Pop would have popped: each chain's id and buffer, in order, in
// flight until a Push of its Used entry; what it does not take must be
// left for Pop exactly as it was.

// wantTaken checks that the first len(addrs) entries of j are the buffers
// of ids at addrs, n bytes each, used with length 0.
func wantTaken(t *testing.T, e *env, j *virtq.TakeJob, ids []uint16, addrs []uint64, n uint64) {
	t.Helper()
	for i, a := range addrs {
		want := e.m.Bytes(a, n)
		if b := j.Bufs[i]; len(b) != len(want) || &b[0] != &want[0] {
			t.Fatalf("taken %d: %d bytes at %p, want %d at %p (guest %#x)", i, len(b), b, len(want), want, a)
		}
		if u := j.Used[i]; u != (virtq.Used{ID: ids[i], Descs: 1}) {
			t.Fatalf("taken %d: used %+v, want id %d, one slot, length 0", i, u, ids[i])
		}
	}
}

// TestTakeRounds: rounds of Takes over a ring of 8, some asking for more
// chains than there are, across the ring's end and its laps, every third
// round popped instead: every buffer is taken in order, returned by a Push
// of its Used entry, and the two paths agree on where the ring is.
func TestTakeRounds(t *testing.T) {
	e := newEnv(t, 8, 0, 1<<20)
	var j virtq.TakeJob
	next := 0
	for round := 0; round < 40; round++ {
		m := 1 + round%8
		var ids []uint16
		var addrs []uint64
		for i := 0; i < m; i++ {
			a := e.bufBase + uint64(next%64)*256
			next++
			ids = append(ids, mustAdd(e, []drivertest.PackedBuf{{Addr: a, Len: 256}}))
			addrs = append(addrs, a)
		}
		var used []virtq.Used
		if round%3 == 2 {
			n := e.pop(32)
			for i := range n {
				used = append(used, virtq.Used{ID: e.b.Chains[i].ID, Descs: 1})
			}
		} else {
			n := e.r.Take(&j, m+round%3)
			if n != m || e.r.InFlight() != m || j.More {
				t.Fatalf("round %d: took %d (%d in flight, more %v) of %d buffers", round, n, e.r.InFlight(), j.More, m)
			}
			wantTaken(t, e, &j, ids, addrs, 256)
			used = j.Used[:n]
		}
		if err := e.r.Push(used); err != nil {
			t.Fatalf("round %d: Push: %v", round, err)
		}
		cs, err := e.d.Reap(nil)
		if err != nil || len(cs) != m {
			t.Fatalf("round %d: reaped %d (%v), want %d", round, len(cs), err, m)
		}
		for i, c := range cs {
			if c.ID != ids[i] || c.Len != 0 {
				t.Fatalf("round %d: reaped %+v, want id %d length 0", round, c, ids[i])
			}
		}
		if st := e.r.State(); st&0xffff != st>>16 || e.r.InFlight() != 0 {
			t.Fatalf("round %d: state %#x, %d in flight", round, st, e.r.InFlight())
		}
	}
}

// TestTakeStops: buffers Take takes, then one it must not: Take pops the
// good ones and leaves the other to Pop, which takes it as it is (or fails the
// ring for what is wrong with it).
func TestTakeStops(t *testing.T) {
	for _, tc := range []struct {
		name string
		add  func(e *env) // the buffer Take must stop at
		want error        // Pop's error on it, nil: Pop takes it
	}{
		{"chain of two", func(e *env) {
			mustAdd(e, []drivertest.PackedBuf{{Addr: e.bufBase, Len: 64}, {Addr: e.bufBase + 64, Len: 64}})
		}, nil},
		{"indirect", func(e *env) {
			if _, err := e.d.AddIndirect([]drivertest.PackedBuf{{Addr: e.bufBase, Len: 256}}); err != nil {
				e.t.Fatal(err)
			}
		}, nil},
		{"writable", func(e *env) { mustAdd(e, []drivertest.PackedBuf{{Addr: e.bufBase, Len: 256, Write: true}}) }, nil},
		{"outside guest memory", func(e *env) {
			e.d.AddRaw([]drivertest.PackedDesc{{Addr: e.bufBase + e.bufSize - 8, Len: 256, ID: 5}})
		}, virtq.ErrBadAddress},
		{"id in flight", func(e *env) {
			e.d.AddRaw([]drivertest.PackedDesc{{Addr: e.bufBase, Len: 256, ID: 7}})
		}, virtq.ErrBadID},
		{"id taken in this run", func(e *env) {
			e.d.AddRaw([]drivertest.PackedDesc{{Addr: e.bufBase, Len: 256, ID: 10}})
		}, virtq.ErrBadID},
		{"id out of range", func(e *env) {
			e.d.AddRaw([]drivertest.PackedDesc{{Addr: e.bufBase, Len: 256, ID: 16}})
		}, virtq.ErrBadID},
		{"length zero", func(e *env) {
			e.d.AddRaw([]drivertest.PackedDesc{{Addr: e.bufBase, Len: 0, ID: 5}})
		}, nil},
	} {
		// The third buffer comes after 0-5 good ones: at each place
		// of a group of four, and after a whole group.
		for good := 0; good <= 5; good++ {
			if good == 0 && tc.name == "id taken in this run" {
				continue
			}
			t.Run(fmt.Sprintf("%s/after %d", tc.name, good), func(t *testing.T) {
				e := newEnv(t, 16, fIndirect, 1<<20)
				if tc.name == "id in flight" {
					// Buffer 7, popped and not pushed (held, say): the
					// driver then offers id 7 again.
					e.d.AddRaw([]drivertest.PackedDesc{{Addr: e.bufBase, Len: 256, ID: 7}})
					if e.pop(1) != 1 {
						t.Fatal("buffer 7 not popped")
					}
				}
				st, inflight := e.r.State(), e.r.InFlight()
				// Ids 10-15, which the driver model does not hand out
				// before the third buffer's (it takes the lowest free
				// one); the case "id taken in this run" offers 10 again.
				var ids []uint16
				var addrs []uint64
				for i := range good {
					ids = append(ids, uint16(10+i))
					addrs = append(addrs, e.bufBase+4096*uint64(1+i))
					e.d.AddRaw([]drivertest.PackedDesc{{Addr: addrs[i], Len: 256, ID: ids[i]}})
				}
				tc.add(e)
				var j virtq.TakeJob
				if n := e.r.Take(&j, 8); n != good || !j.More {
					t.Fatalf("Take popped %d (more %v), want %d and more", n, j.More, good)
				}
				if got := (e.r.State() - st) & 0x7fff; got != uint32(good) || e.r.InFlight() != inflight+good {
					t.Fatalf("avail index moved by %d (%d in flight), want %d (%d)", got, e.r.InFlight(), good, inflight+good)
				}
				wantTaken(t, e, &j, ids, addrs, 256)
				n, err := e.r.Pop(&e.b, 32)
				if !errors.Is(err, tc.want) || (tc.want == nil && n != 1) {
					t.Fatalf("Pop after Take: %d, %v; want 1 chain or %v", n, err, tc.want)
				}
			})
		}
	}
}

// TestTakeRegions: buffers in two regions, alternating: Take takes them
// all, hinting each region as it goes (Pop's way), in order.
func TestTakeRegions(t *testing.T) {
	e := newEnv(t, 16, 0, 1<<20)
	ids, addrs := e.addInTwoRegions(false)
	var j virtq.TakeJob
	if n := e.r.Take(&j, 32); n != 8 {
		t.Fatalf("Take popped %d of 8", n)
	}
	wantTaken(t, e, &j, ids, addrs, 256)
}

// TestTakeOff: on an IN_ORDER ring (whose used order Push checks against
// an order queue Take does not keep) and on a broken one Take pops
// nothing and leaves the ring as it was; a ReadOnly ring (a transmit
// queue's) ignores WRITE flags, so Take takes those buffers, as Pop does.
func TestTakeOff(t *testing.T) {
	var j virtq.TakeJob
	check := func(name string, e *env) {
		t.Helper()
		st := e.r.State()
		if n := e.r.Take(&j, 4); n != 0 || !j.More || e.r.State() != st || e.r.InFlight() != 0 {
			t.Fatalf("%s: Take popped %d (more %v), state %#x -> %#x", name, n, j.More, st, e.r.State())
		}
	}
	e := newEnv(t, 8, fInOrder, 1<<20)
	addSingles(e, 0, 1)
	check("IN_ORDER", e)

	e = newEnv(t, 8, 0, 1<<20)
	e.d.AddRaw([]drivertest.PackedDesc{{Addr: e.bufBase, Len: 256, ID: 9}})
	if _, err := e.r.Pop(&e.b, 4); !errors.Is(err, virtq.ErrBadID) {
		t.Fatalf("Pop of id 9 on a ring of 8: %v", err)
	}
	check("broken", e)

	e = newEnv(t, 8, 0, 1<<20)
	e.readOnly()
	addSingles(e, 0, 1) // writable, as far as the flags go
	if n := e.r.Take(&j, 4); n != 2 {
		t.Fatalf("ReadOnly ring: Take popped %d of 2 writable-flagged buffers", n)
	}
	wantTaken(t, e, &j, []uint16{0, 1}, []uint64{e.bufBase, e.bufBase + 64}, 64)
}
