package packed_test

import (
	"errors"
	"testing"

	"github.com/xvswitch/xvswitch/virtq"
	"github.com/xvswitch/xvswitch/virtq/drivertest"
)

// Tests of the batched path (batch.go): groups of four aligned single
// descriptors. A hostile group must fail exactly as the general path does;
// a group the fast path must not take pops the same chains one by one.

// addSingles makes one single-descriptor chain available per id, at the
// next slots, each its own 64-byte buffer.
func addSingles(e *env, ids ...uint16) {
	for _, id := range ids {
		e.d.AddRaw([]drivertest.PackedDesc{{Addr: e.bufBase + uint64(id)*64, Len: 64, ID: id, Flags: dWrite}})
	}
}

func TestHostileBatch(t *testing.T) {
	runHostile(t, []hostileCase{
		{name: "id twice in a group", size: 8, want: virtq.ErrBadID, setup: func(e *env) {
			addSingles(e, 0, 1, 2, 1)
		}},
		{name: "id out of range in a group", size: 8, want: virtq.ErrBadID, setup: func(e *env) {
			addSingles(e, 0, 1, 2, 8)
		}},
		{name: "id 0xffff in a group", size: 4, want: virtq.ErrBadID, setup: func(e *env) {
			addSingles(e, 0, 0xffff, 2, 3)
		}},
		{name: "id in flight from the group before", size: 8, want: virtq.ErrBadID, setup: func(e *env) {
			addSingles(e, 0, 1, 2, 3)
			if e.pop(32) != 4 {
				e.t.Fatal("legit group not popped")
			}
			addSingles(e, 4, 5, 2, 7)
		}},
		{name: "id in flight, later group of the same burst", size: 8, want: virtq.ErrBadID, setup: func(e *env) {
			addSingles(e, 0, 1, 2, 3, 4, 5, 6, 3)
		}},
		{name: "buffer running off the end of a region in a group", size: 8, want: virtq.ErrBadAddress, setup: func(e *env) {
			addSingles(e, 0, 1)
			e.d.AddRaw([]drivertest.PackedDesc{{Addr: e.bufBase + e.bufSize - 8, Len: 16, ID: 2}})
			addSingles(e, 3)
		}},
		{name: "address in a gap in a group", size: 8, want: virtq.ErrBadAddress, setup: func(e *env) {
			addSingles(e, 0, 1, 2)
			e.d.AddRaw([]drivertest.PackedDesc{{Addr: e.bufBase - 4096, Len: 10, ID: 3}})
		}},
		{name: "length larger than guest memory in a group", size: 8, want: virtq.ErrBadLength, setup: func(e *env) {
			addSingles(e, 0)
			e.d.AddRaw([]drivertest.PackedDesc{{Addr: e.bufBase, Len: 0xffffffff, ID: 1}})
			addSingles(e, 2, 3)
		}},
		{name: "group reusing slots still in flight", size: 8, want: virtq.ErrBadIndex, setup: func(e *env) {
			// Two chains of three slots and two singles: all 8 slots in
			// flight, the driver is at slot 0 of its next lap.
			three := []drivertest.PackedBuf{{Addr: e.bufBase, Len: 10}, {Addr: e.bufBase, Len: 10}, {Addr: e.bufBase, Len: 10}}
			mustAdd(e, three)
			mustAdd(e, three)
			mustAdd(e, three[:1])
			mustAdd(e, three[:1])
			if e.pop(32) != 4 {
				e.t.Fatal("legit chains not popped")
			}
			addSingles(e, 4, 5, 6, 7)
		}},
	})
}

// TestBatchStopsAtUnavailable: a group whose third descriptor carries the
// AVAIL/USED bits of the other lap (not yet available, or left over from the
// lap before) pops the two before it and nothing more, and what the driver
// publishes next continues from there.
func TestBatchStopsAtUnavailable(t *testing.T) {
	for _, flip := range []uint16{drivertest.PackedAvail | drivertest.PackedUsed, 0} {
		e := newEnv(t, 8, 0, 1<<20)
		addSingles(e, 0, 1, 2, 3)
		// Slot 2: the bits of neither lap's available state, or of the
		// used state of the previous lap.
		d := e.d.Desc()
		d[2*16+15] = d[2*16+15]&^0x80 | byte(flip>>8)&0x80
		d[2*16+14] = d[2*16+14]&^0x80 | byte(flip)&0x80
		if n := e.pop(32); n != 2 || e.b.Chains[0].ID != 0 || e.b.Chains[1].ID != 1 {
			t.Fatalf("flags %#x: popped %d (%+v), want ids 0 and 1", flip, n, e.b.Chains[:n])
		}
		if e.r.State()&0x7fff != 2 {
			t.Fatalf("next avail %d, want 2", e.r.State()&0x7fff)
		}
	}
}

// TestBatchStopsMidGroup: a group whose third buffer lies in another
// region than the hinted one (legit: the run stops there) and, on the next
// lap, a group whose third id repeats the first (hostile): the run pops the
// chains before the one that stops it and the general path takes that one,
// so the burst is what popping one by one gives: every chain with its own
// id and bytes, or the hostile one failing the ring with ErrBadID and
// nothing popped.
func TestBatchStopsMidGroup(t *testing.T) {
	e := newEnv(t, 8, 0, 1<<20)
	other := e.m.Regions[0].GuestAddr + e.m.Regions[0].Size - 4096 // the ring's region
	round := func(addrs []uint64) {
		t.Helper()
		var ids []uint16
		for _, a := range addrs {
			ids = append(ids, mustAdd(e, []drivertest.PackedBuf{{Addr: a, Len: 64, Write: true}}))
		}
		if n := e.pop(32); n != len(addrs) {
			t.Fatalf("popped %d, want %d", n, len(addrs))
		}
		used := make([]virtq.Used, len(addrs))
		for i, a := range addrs {
			c, w := e.b.Chains[i], e.b.Writable(i)
			if c.ID != ids[i] || c.WriteLen != 64 || len(w) != 1 || &w[0][0] != &e.m.Bytes(a, 64)[0] {
				t.Fatalf("chain %d: %+v, want id %d over %#x", i, c, ids[i], a)
			}
			used[i] = virtq.Used{ID: c.ID, Len: 1}
		}
		if err := e.r.Push(used); err != nil {
			t.Fatal(err)
		}
		if got, err := e.d.Reap(nil); err != nil || len(got) != len(addrs) {
			t.Fatalf("reaped %v, %v", got, err)
		}
	}
	b := e.bufBase
	// Slots 0-3 leave the buffers' region hinted; the group at 4 stops
	// at its third buffer.
	round([]uint64{b, b + 64, b + 128, b + 192})
	round([]uint64{b, b + 64, other, b + 192})
	// Slots 0-3 of the next lap: ids 4, 5, 4, 7.
	addSingles(e, 4, 5, 4, 7)
	if _, err := e.r.Pop(&e.b, 32); !errors.Is(err, virtq.ErrBadID) {
		t.Fatalf("Pop: %v, want ErrBadID", err)
	}
	if e.b.N != 0 || e.r.InFlight() != 0 {
		t.Fatalf("after the failed Pop: %d in the burst, %d in flight", e.b.N, e.r.InFlight())
	}
}

// TestBatchLaps: a ring whose size is not a multiple of four (groups at 0
// and 4, single pops at 8 and 9, the wrap boundary) over many laps, with
// the buffers coming back in every order: every chain pops with its own
// id and bytes, and the driver reaps them all.
func TestBatchLaps(t *testing.T) {
	for _, features := range []uint64{0, fInOrder} {
		e := newEnv(t, 10, features, 1<<20)
		done := make([]drivertest.PackedCompletion, 0, 10)
		var used [virtq.MaxBurst]virtq.Used
		for lap := 0; lap < 40; lap++ {
			k := 1 + lap%10
			ids := make(map[uint16]bool)
			for i := 0; i < k; i++ {
				id, err := e.d.Add([]drivertest.PackedBuf{{Addr: e.bufBase + uint64(i)*128, Len: 100, Write: true}})
				if err != nil {
					t.Fatal(err)
				}
				ids[id] = true
			}
			n := e.pop(32)
			if n != k {
				t.Fatalf("lap %d: popped %d of %d", lap, n, k)
			}
			for i := 0; i < n; i++ {
				c := e.b.Chains[i]
				if !ids[c.ID] || c.Descs != 1 || c.WriteLen != 100 || len(e.b.Writable(i)) != 1 {
					t.Fatalf("lap %d chain %d: %+v", lap, i, c)
				}
				delete(ids, c.ID)
				used[i] = virtq.Used{ID: c.ID, Descs: 1, Len: 50}
			}
			if features&fInOrder == 0 && lap%2 == 1 {
				for i, j := 0, n-1; i < j; i, j = i+1, j-1 {
					used[i], used[j] = used[j], used[i]
				}
			}
			if err := e.r.Push(used[:n]); err != nil {
				t.Fatal(err)
			}
			var err error
			if done, err = e.d.Reap(done[:0]); err != nil || len(done) != n {
				t.Fatalf("lap %d: reaped %d of %d: %v", lap, len(done), n, err)
			}
		}
	}
}

// TestPushGroupRefuses: a Push whose group of four names a chain twice,
// one not in flight or one of several slots leaves the group to the entry
// by entry path: the entries before the bad one reach the driver, the bad
// one fails the push, nothing after it is written.
func TestPushGroupRefuses(t *testing.T) {
	cases := []struct {
		name string
		used func(ids []uint16) []virtq.Used
		ok   int // entries the driver reaps
	}{
		{"id twice", func(ids []uint16) []virtq.Used {
			return []virtq.Used{{ID: ids[0]}, {ID: ids[1]}, {ID: ids[1]}, {ID: ids[3]}}
		}, 2},
		{"id not in flight", func(ids []uint16) []virtq.Used {
			return []virtq.Used{{ID: ids[0]}, {ID: 7}, {ID: ids[2]}, {ID: ids[3]}}
		}, 1},
		{"id out of range", func(ids []uint16) []virtq.Used {
			return []virtq.Used{{ID: ids[0]}, {ID: ids[1]}, {ID: ids[2]}, {ID: 0xffff}}
		}, 3},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, 8, 0, 1<<20)
			var ids []uint16
			for i := 0; i < 4; i++ {
				ids = append(ids, mustAdd(e, []drivertest.PackedBuf{{Addr: e.bufBase + uint64(i)*64, Len: 64, Write: true}}))
			}
			if e.pop(32) != 4 {
				t.Fatal("chains not popped")
			}
			if err := e.r.Push(tc.used(ids)); !errors.Is(err, virtq.ErrUsedNotInFlight) {
				t.Fatalf("Push: %v, want ErrUsedNotInFlight", err)
			}
			got, err := e.d.Reap(nil)
			if err != nil || len(got) != tc.ok {
				t.Fatalf("driver reaped %v, %v; want the first %d", got, err, tc.ok)
			}
			for i, c := range got {
				if c.ID != ids[i] {
					t.Fatalf("reaped %v, want ids %v first", got, ids)
				}
			}
		})
	}
}

// TestPushGroupMixed: groups and single entries in one Push, a chain of
// two slots that shifts the groups' alignment, lengths clamped: the
// driver reaps every entry with its length.
func TestPushGroupMixed(t *testing.T) {
	e := newEnv(t, 16, 0, 1<<20)
	var ids []uint16
	for i := 0; i < 11; i++ {
		bufs := []drivertest.PackedBuf{{Addr: e.bufBase + uint64(i)*128, Len: 64, Write: true}}
		if i == 5 {
			bufs = append(bufs, drivertest.PackedBuf{Addr: e.bufBase + uint64(i)*128 + 64, Len: 64, Write: true})
		}
		ids = append(ids, mustAdd(e, bufs))
	}
	if e.pop(32) != 11 {
		t.Fatal("chains not popped")
	}
	var used []virtq.Used
	for i, id := range ids {
		used = append(used, virtq.Used{ID: id, Len: uint32(10 * i)})
	}
	used[2].Len = 1000 // clamped to 64
	if err := e.r.Push(used); err != nil {
		t.Fatal(err)
	}
	got, err := e.d.Reap(nil)
	if err != nil || len(got) != len(ids) {
		t.Fatalf("reaped %d of %d: %v", len(got), len(ids), err)
	}
	for i, c := range got {
		want := min(used[i].Len, 64)
		if i == 5 {
			want = min(used[i].Len, 128)
		}
		if c.ID != ids[i] || c.Len != want {
			t.Fatalf("completion %d: %+v, want id %d len %d", i, c, ids[i], want)
		}
	}
}
