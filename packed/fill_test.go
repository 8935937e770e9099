package packed_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/xvswitch/xvswitch/guestmem"
	"github.com/xvswitch/xvswitch/packed"
	"github.com/xvswitch/xvswitch/virtq"
	"github.com/xvswitch/xvswitch/virtq/drivertest"
)

// Tests of the one-pass receive path (fill.go). What a Fill places must be
// what Pop then Push would have given the driver: each frame after its head
// in the next buffer, used in order with head plus frame as its length;
// what it does not take must be left for Pop exactly as it was.

// wantFilled checks that the driver reaps the first len(addrs) frames of j
// in order, in the buffers of ids at addrs, each after its head.
func wantFilled(t *testing.T, e *env, j *virtq.FillJob, ids []uint16, addrs []uint64) {
	t.Helper()
	cs, err := e.d.Reap(nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != len(ids) {
		t.Fatalf("reaped %d buffers, want %d", len(cs), len(ids))
	}
	for i, c := range cs {
		src := j.Src[i]
		if c.ID != ids[i] || c.Len != uint32(virtq.FillHeadLen+len(src)) {
			t.Fatalf("used %d: id %d length %d, want id %d length %d", i, c.ID, c.Len, ids[i], virtq.FillHeadLen+len(src))
		}
		got := e.m.Bytes(addrs[i], uint64(c.Len))
		if binary.LittleEndian.Uint64(got) != j.Head[i].Lo || binary.LittleEndian.Uint32(got[8:]) != j.Head[i].Hi {
			t.Fatalf("used %d: head % x, want %#x %#x", i, got[:virtq.FillHeadLen], j.Head[i].Lo, j.Head[i].Hi)
		}
		if !bytes.Equal(got[virtq.FillHeadLen:], src) {
			t.Fatalf("used %d: frame differs", i)
		}
	}
}

// TestFillRounds: rounds of Fills (batched and eager) over a ring of 8,
// some with more frames than buffers, across the ring's end and its laps,
// every third round popped and pushed instead: every frame arrives whole
// and in order, and the two paths agree on where the ring is.
func TestFillRounds(t *testing.T) {
	for _, eager := range []bool{false, true} {
		t.Run(map[bool]string{false: "batched", true: "eager"}[eager], func(t *testing.T) { fillRounds(t, eager) })
	}
}

// frameAlign is where a round of TestFillRounds puts its buffers in their
// 256-byte slots, and how long they are: every other round as DPDK's
// virtio driver lays them out, the frame after the 12-byte head starting a
// cache line, so that short frames go as streaming stores
// (streams, fillcopy.go).
func frameAlign(round int) (off uint64, blen uint32) {
	if round%2 == 1 {
		return 64 - virtq.FillHeadLen, 192
	}
	return 0, 256
}

// fillRounds is TestFillRounds with eager Fills (FillJob.Eager) or not.
func fillRounds(t *testing.T, eager bool) {
	e := newEnv(t, 8, 0, 1<<20)
	next := 0
	for round := 0; round < 40; round++ {
		m := 1 + round%8
		var ids []uint16
		var addrs []uint64
		off, blen := frameAlign(round)
		for i := 0; i < m; i++ {
			a := e.bufBase + uint64(next%64)*256 + off
			next++
			ids = append(ids, mustAdd(e, []drivertest.PackedBuf{{Addr: a, Len: blen, Write: true}}))
			addrs = append(addrs, a)
		}
		if round%3 == 2 {
			n := e.pop(32)
			used := make([]virtq.Used, n)
			for i := range used {
				used[i] = virtq.Used{ID: e.b.Chains[i].ID, Len: 0}
			}
			if err := e.r.Push(used); err != nil {
				t.Fatal(err)
			}
			if cs, err := e.d.Reap(nil); err != nil || len(cs) != m {
				t.Fatalf("round %d: reaped %d (%v), want %d", round, len(cs), err, m)
			}
			continue
		}
		j := drivertest.FillJob(m+round%3, func(i int) int { return 1 + (round*37+i*13)%(int(blen)-virtq.FillHeadLen) })
		j.Eager = eager
		n, err := e.r.Fill(j)
		if n != m || err != nil {
			t.Fatalf("round %d: Fill placed %d (%v) of %d frames into %d buffers", round, n, err, j.N, m)
		}
		if !e.r.NeedNotify() {
			t.Fatalf("round %d: no interrupt asked for after a Fill", round)
		}
		if want := map[bool]int{true: n}[eager]; j.Published != want {
			t.Fatalf("round %d: %d frames published as they went, want %d", round, j.Published, want)
		}
		wantFilled(t, e, j, ids, addrs)
		if e.r.InFlight() != 0 {
			t.Fatalf("round %d: %d in flight after a Fill", round, e.r.InFlight())
		}
		st := e.r.State()
		if st&0xffff != st>>16 {
			t.Fatalf("round %d: state %#x: avail and used apart", round, st)
		}
	}
}

// TestFillStops: two buffers Fill takes, then one it must not: Fill places
// two frames and leaves the third buffer to Pop, which takes it as it is
// (or fails the ring for what is wrong with it).
func TestFillStops(t *testing.T) {
	for _, tc := range []struct {
		name string
		add  func(e *env) // the third buffer
		want error        // Pop's error on it, nil: Pop takes it
	}{
		{"chain of two", func(e *env) {
			mustAdd(e, []drivertest.PackedBuf{{Addr: e.bufBase, Len: 64, Write: true}, {Addr: e.bufBase + 64, Len: 64, Write: true}})
		}, nil},
		{"indirect", func(e *env) {
			if _, err := e.d.AddIndirect([]drivertest.PackedBuf{{Addr: e.bufBase, Len: 256, Write: true}}); err != nil {
				e.t.Fatal(err)
			}
		}, nil},
		{"read-only", func(e *env) { mustAdd(e, []drivertest.PackedBuf{{Addr: e.bufBase, Len: 256}}) }, nil},
		{"too short for head and frame", func(e *env) {
			mustAdd(e, []drivertest.PackedBuf{{Addr: e.bufBase, Len: virtq.FillHeadLen + 99, Write: true}})
		}, nil},
		{"outside guest memory", func(e *env) {
			e.d.AddRaw([]drivertest.PackedDesc{{Addr: e.bufBase + e.bufSize - 8, Len: 256, ID: 5, Flags: dWrite}})
		}, virtq.ErrBadAddress},
		{"id in flight", func(e *env) {
			e.d.AddRaw([]drivertest.PackedDesc{{Addr: e.bufBase, Len: 256, ID: 7, Flags: dWrite}})
		}, virtq.ErrBadID},
		{"id out of range", func(e *env) {
			e.d.AddRaw([]drivertest.PackedDesc{{Addr: e.bufBase, Len: 256, ID: 16, Flags: dWrite}})
		}, virtq.ErrBadID},
		{"length zero", func(e *env) {
			e.d.AddRaw([]drivertest.PackedDesc{{Addr: e.bufBase, Len: 0, ID: 5, Flags: dWrite}})
		}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, 16, fIndirect, 1<<20)
			if tc.name == "id in flight" {
				// Buffer 7, popped and not pushed (lent, say): the
				// driver then offers id 7 again.
				e.d.AddRaw([]drivertest.PackedDesc{{Addr: e.bufBase, Len: 256, ID: 7, Flags: dWrite}})
				if e.pop(1) != 1 {
					t.Fatal("buffer 7 not popped")
				}
			}
			st := e.r.State()
			addrs := []uint64{e.bufBase + 4096, e.bufBase + 8192}
			ids := []uint16{mustAdd(e, []drivertest.PackedBuf{{Addr: addrs[0], Len: 256, Write: true}}),
				mustAdd(e, []drivertest.PackedBuf{{Addr: addrs[1], Len: 256, Write: true}})}
			tc.add(e)
			j := drivertest.FillJob(4, func(int) int { return 100 })
			if n, err := e.r.Fill(j); n != 2 || err != nil {
				t.Fatalf("Fill placed %d (%v), want 2", n, err)
			}
			if got := (e.r.State() - st) & 0x7fff; got != 2 {
				t.Fatalf("avail index moved by %d, want 2", got)
			}
			wantFilled(t, e, j, ids, addrs)
			n, err := e.r.Pop(&e.b, 32)
			if !errors.Is(err, tc.want) || (tc.want == nil && n != 1) {
				t.Fatalf("Pop after Fill: %d, %v; want 1 chain or %v", n, err, tc.want)
			}
		})
	}
}

// TestFillDuplicateID: a driver that offers one id twice in a run fails
// the ring with ErrBadID, as Pop would, before anything is placed.
func TestFillDuplicateID(t *testing.T) {
	e := newEnv(t, 8, 0, 1<<20)
	addSingles(e, 0, 1, 0)
	j := drivertest.FillJob(3, func(int) int { return 20 })
	if n, err := e.r.Fill(j); n != 0 || !errors.Is(err, virtq.ErrBadID) {
		t.Fatalf("Fill: %d, %v; want ErrBadID", n, err)
	}
	if cs, err := e.d.Reap(nil); len(cs) != 0 || err != nil {
		t.Fatalf("reaped %d (%v) after a failed Fill", len(cs), err)
	}
	if _, err := e.r.Pop(&e.b, 32); !errors.Is(err, virtq.ErrBroken) {
		t.Fatalf("Pop after a failed Fill: %v", err)
	}
	// The same ids in two Fills are two uses, not a duplicate.
	e = newEnv(t, 8, 0, 1<<20)
	for round := 0; round < 6; round++ {
		ids := []uint16{mustAdd(e, []drivertest.PackedBuf{{Addr: e.bufBase, Len: 64, Write: true}}),
			mustAdd(e, []drivertest.PackedBuf{{Addr: e.bufBase + 64, Len: 64, Write: true}})}
		j := drivertest.FillJob(2, func(int) int { return 20 })
		if n, err := e.r.Fill(j); n != 2 || err != nil {
			t.Fatalf("round %d: Fill: %d, %v", round, n, err)
		}
		wantFilled(t, e, j, ids, []uint64{e.bufBase, e.bufBase + 64})
	}
}

// TestFillRegions: buffers in two regions, alternating: Fill takes them
// all, hinting each region as it goes (Pop's way), in order.
func TestFillRegions(t *testing.T) {
	e := newEnv(t, 16, 0, 1<<20)
	ids, addrs := e.addInTwoRegions(true)
	j := drivertest.FillJob(8, func(i int) int { return 60 + i })
	if n, err := e.r.Fill(j); n != 8 || err != nil {
		t.Fatalf("Fill placed %d (%v), want 8", n, err)
	}
	wantFilled(t, e, j, ids, addrs)
}

// TestFillOff: rings Fill leaves to Pop and Push, placing nothing:
// IN_ORDER (a run is one used descriptor there), a transmit ring, writes
// being logged (live migration), a broken ring.
func TestFillOff(t *testing.T) {
	j := drivertest.FillJob(2, func(int) int { return 20 })
	check := func(name string, e *env) {
		t.Helper()
		st := e.r.State()
		if n, err := e.r.Fill(j); n != 0 || err != nil || e.r.State() != st {
			t.Fatalf("%s: Fill placed %d (%v), state %#x -> %#x", name, n, err, st, e.r.State())
		}
	}
	e := newEnv(t, 8, fInOrder, 1<<20)
	addSingles(e, 0, 1)
	check("IN_ORDER", e)

	e = newEnv(t, 8, 0, 1<<20)
	e.readOnly()
	addSingles(e, 0, 1)
	check("transmit ring", e)

	e = newEnv(t, 8, 0, 1<<20)
	cfg := e.cfg
	cfg.Mem = drivertest.NewLog(e.m).Logged(e.m)
	var err error
	if e.r, err = packed.New(cfg); err != nil {
		t.Fatal(err)
	}
	addSingles(e, 0, 1)
	check("logged", e)

	e = newEnv(t, 8, 0, 1<<20)
	addSingles(e, 0, 0)
	if _, err := e.r.Pop(&e.b, 32); !errors.Is(err, virtq.ErrBadID) {
		t.Fatal(err)
	}
	check("broken", e)
}

// TestFillFewSlots: with slots in flight (buffers lent out), a Fill takes
// no more than the slots left, even when the driver, hostile, marks more
// available: its used descriptors never pass a slot not read.
func TestFillFewSlots(t *testing.T) {
	e := newEnv(t, 4, 0, 1<<20)
	addSingles(e, 0, 1)
	if e.pop(2) != 2 {
		t.Fatal("two buffers not popped")
	}
	addSingles(e, 2, 3)
	// Slot 0 of the next lap, offered over a buffer still in flight.
	e.d.AddRaw([]drivertest.PackedDesc{{Addr: e.bufBase, Len: 64, ID: 2, Flags: dWrite}})
	j := drivertest.FillJob(3, func(int) int { return 20 })
	if n, err := e.r.Fill(j); n != 2 || err != nil {
		t.Fatalf("Fill placed %d (%v), want 2", n, err)
	}
	if e.r.InFlight() != 2 {
		t.Fatalf("%d in flight, want the 2 popped", e.r.InFlight())
	}
}

// TestFillChoosesStores: enough full bursts of short frames laid out as
// DPDK's driver lays them (each starting a cache line) for the ring's
// StreamChoice to time bursts both ways and decide twice: every frame
// arrives whole whichever way its burst went, and the decisions are
// counted (guestmem.StreamWindows, which the metrics show; no other test
// here runs bursts enough to complete a window).
func TestFillChoosesStores(t *testing.T) {
	const bursts = 2*2*16*64 + 64 // two windows of 16 timed bursts each way, one in 64 timed
	e := newEnv(t, 256, 0, 1<<20)
	ord0, str0 := guestmem.StreamWindows()
	next := 0
	for burst := 0; burst < bursts; burst++ {
		ids, addrs := make([]uint16, 0, virtq.MaxBurst), make([]uint64, 0, virtq.MaxBurst)
		for range virtq.MaxBurst {
			a := e.bufBase + uint64(next%1024)*256 + 64 - virtq.FillHeadLen
			next++
			clear(e.m.Bytes(a, 192)) // a frame left from a lap before would match
			ids = append(ids, mustAdd(e, []drivertest.PackedBuf{{Addr: a, Len: 192, Write: true}}))
			addrs = append(addrs, a)
		}
		j := drivertest.FillJob(virtq.MaxBurst, func(i int) int { return 64 + (burst+i)%65 })
		if n, err := e.r.Fill(j); n != virtq.MaxBurst || err != nil {
			t.Fatalf("burst %d: Fill placed %d (%v) of %d", burst, n, err, virtq.MaxBurst)
		}
		wantFilled(t, e, j, ids, addrs)
	}
	ord1, str1 := guestmem.StreamWindows()
	if got := ord1 - ord0 + str1 - str0; got != 2 {
		t.Errorf("%d windows decided (%d ordinary, %d streaming), want 2", got, ord1-ord0, str1-str0)
	}
}
