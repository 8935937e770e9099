package packed_test

import (
	"errors"
	"testing"

	"github.com/xvswitch/xvswitch/virtq"
	"github.com/xvswitch/xvswitch/virtq/drivertest"
)

// hostileCase makes the driver break the contract in one way; Pop must
// return want (and every sentinel in also) and leave the ring broken.
type hostileCase struct {
	name     string
	size     uint16
	features uint64
	// setup runs the driver side; it may pop legit chains first.
	setup func(e *env)
	want  error
	also  []error
}

const (
	dNext  = drivertest.PackedNext
	dWrite = drivertest.PackedWrite
	dInd   = drivertest.PackedIndirect
)

func TestHostile(t *testing.T) {
	cases := []hostileCase{
		{name: "length larger than guest memory", size: 8, want: virtq.ErrBadLength, setup: func(e *env) {
			e.d.AddRaw([]drivertest.PackedDesc{{Addr: e.bufBase, Len: 0xffffffff, ID: 0}})
		}},
		{name: "address in a gap", size: 8, want: virtq.ErrBadAddress, setup: func(e *env) {
			e.d.AddRaw([]drivertest.PackedDesc{{Addr: e.bufBase - 4096, Len: 10, ID: 0}})
		}},
		{name: "address below all memory", size: 8, want: virtq.ErrBadAddress, setup: func(e *env) {
			e.d.AddRaw([]drivertest.PackedDesc{{Addr: 0, Len: 10, ID: 0}})
		}},
		{name: "buffer running off the end of a region", size: 8, want: virtq.ErrBadAddress, setup: func(e *env) {
			e.d.AddRaw([]drivertest.PackedDesc{{Addr: e.bufBase + e.bufSize - 8, Len: 16, ID: 0}})
		}},
		{name: "address wrapping the address space", size: 8, want: virtq.ErrBadAddress, setup: func(e *env) {
			e.d.AddRaw([]drivertest.PackedDesc{{Addr: ^uint64(0) - 4, Len: 100, ID: 0}})
		}},
		{name: "id out of range", size: 8, want: virtq.ErrBadID, setup: func(e *env) {
			e.d.AddRaw([]drivertest.PackedDesc{{Addr: e.bufBase, Len: 10, ID: 8}})
		}},
		{name: "id 0xffff", size: 1, want: virtq.ErrBadID, setup: func(e *env) {
			e.d.AddRaw([]drivertest.PackedDesc{{Addr: e.bufBase, Len: 10, ID: 0xffff}})
		}},
		{name: "id in flight from an earlier burst", size: 8, want: virtq.ErrBadID, setup: func(e *env) {
			id := mustAdd(e, []drivertest.PackedBuf{{Addr: e.bufBase, Len: 10}})
			if e.pop(32) != 1 {
				e.t.Fatal("legit chain not popped")
			}
			e.d.AddRaw([]drivertest.PackedDesc{{Addr: e.bufBase, Len: 10, ID: id}})
		}},
		{name: "id twice in one burst", size: 8, want: virtq.ErrBadID, setup: func(e *env) {
			e.d.AddRaw([]drivertest.PackedDesc{{Addr: e.bufBase, Len: 10, ID: 3}})
			e.d.AddRaw([]drivertest.PackedDesc{{Addr: e.bufBase, Len: 10, ID: 3}})
		}},
		{name: "id of a chain is in its last descriptor", size: 8, want: virtq.ErrBadID, setup: func(e *env) {
			// Head carries a fine id, the last descriptor a bad one.
			e.d.AddRaw([]drivertest.PackedDesc{{Addr: e.bufBase, Len: 10, ID: 1, Flags: dNext}, {Addr: e.bufBase, Len: 10, ID: 99}})
		}},
		{name: "chain around the whole ring", size: 8, want: virtq.ErrChainTooLong, also: []error{virtq.ErrLoop}, setup: func(e *env) {
			ds := make([]drivertest.PackedDesc, 8)
			for i := range ds {
				ds[i] = drivertest.PackedDesc{Addr: e.bufBase, Len: 10, Flags: dNext}
			}
			e.d.AddRaw(ds)
		}},
		{name: "chain around a ring of one", size: 1, want: virtq.ErrChainTooLong, also: []error{virtq.ErrLoop}, setup: func(e *env) {
			e.d.AddRaw([]drivertest.PackedDesc{{Addr: e.bufBase, Len: 10, Flags: dNext}})
		}},
		{name: "chain around the ring from mid-ring", size: 5, want: virtq.ErrChainTooLong, also: []error{virtq.ErrLoop}, setup: func(e *env) {
			for i := 0; i < 3; i++ {
				mustAdd(e, []drivertest.PackedBuf{{Addr: e.bufBase, Len: 10}})
			}
			completeAll(e)
			ds := make([]drivertest.PackedDesc, 5)
			for i := range ds {
				ds[i] = drivertest.PackedDesc{Addr: e.bufBase, Len: 10, Flags: dNext}
			}
			e.d.AddRaw(ds)
		}},
		{name: "chain longer than the device limit", size: 2048, want: virtq.ErrChainTooLong, setup: func(e *env) {
			ds := make([]drivertest.PackedDesc, virtq.MaxChainDescs+1)
			for i := range ds {
				ds[i] = drivertest.PackedDesc{Addr: e.bufBase, Len: 10, Flags: dNext}
			}
			ds[len(ds)-1].Flags = 0
			e.d.AddRaw(ds)
		}},
		{name: "chain whose lengths total more than 4 GiB", size: 1024, want: virtq.ErrBadLength, setup: func(e *env) {
			ds := make([]drivertest.PackedDesc, 600)
			for i := range ds {
				ds[i] = drivertest.PackedDesc{Addr: e.bufBase, Len: uint32(e.bufSize), Flags: dNext}
			}
			ds[len(ds)-1].Flags = 0
			e.d.AddRaw(ds)
		}},
		{name: "readable after writable", size: 8, want: virtq.ErrWriteBeforeRead, setup: func(e *env) {
			e.d.AddRaw([]drivertest.PackedDesc{{Addr: e.bufBase, Len: 10, Flags: dNext | dWrite}, {Addr: e.bufBase, Len: 10}})
		}},
		{name: "indirect not negotiated", size: 8, want: virtq.ErrBadIndirect, setup: func(e *env) {
			tb := e.d.WriteTable([]drivertest.PackedDesc{{Addr: e.bufBase, Len: 10}})
			e.d.AddRaw([]drivertest.PackedDesc{{Addr: tb, Len: 16, Flags: dInd}})
		}},
		{name: "nested indirect", size: 8, features: fIndirect, want: virtq.ErrNestedIndirect, setup: func(e *env) {
			inner := e.d.WriteTable([]drivertest.PackedDesc{{Addr: e.bufBase, Len: 10}})
			tb := e.d.WriteTable([]drivertest.PackedDesc{{Addr: e.bufBase, Len: 10}, {Addr: inner, Len: 16, Flags: dInd}})
			e.d.AddRaw([]drivertest.PackedDesc{{Addr: tb, Len: 32, Flags: dInd}})
		}},
		{name: "indirect table of zero bytes", size: 8, features: fIndirect, want: virtq.ErrBadIndirect, also: []error{virtq.ErrBadLength}, setup: func(e *env) {
			tb := e.d.WriteTable([]drivertest.PackedDesc{{Addr: e.bufBase, Len: 10}})
			e.d.AddRaw([]drivertest.PackedDesc{{Addr: tb, Len: 0, Flags: dInd}})
		}},
		{name: "indirect table not a multiple of 16", size: 8, features: fIndirect, want: virtq.ErrBadIndirect, also: []error{virtq.ErrBadLength}, setup: func(e *env) {
			tb := e.d.WriteTable([]drivertest.PackedDesc{{Addr: e.bufBase, Len: 10}, {Addr: e.bufBase, Len: 10}})
			e.d.AddRaw([]drivertest.PackedDesc{{Addr: tb, Len: 24, Flags: dInd}})
		}},
		{name: "indirect table larger than guest memory", size: 8, features: fIndirect, want: virtq.ErrBadLength, also: []error{virtq.ErrBadIndirect}, setup: func(e *env) {
			e.d.AddRaw([]drivertest.PackedDesc{{Addr: e.bufBase, Len: 0xfffffff0, Flags: dInd}})
		}},
		{name: "indirect table of too many descriptors", size: 8, features: fIndirect, want: virtq.ErrChainTooLong, setup: func(e *env) {
			ds := make([]drivertest.PackedDesc, virtq.MaxChainDescs+1)
			for i := range ds {
				ds[i] = drivertest.PackedDesc{Addr: e.bufBase, Len: 10}
			}
			tb := e.d.WriteTable(ds)
			e.d.AddRaw([]drivertest.PackedDesc{{Addr: tb, Len: uint32(len(ds)) * 16, Flags: dInd}})
		}},
		{name: "indirect table outside guest memory", size: 8, features: fIndirect, want: virtq.ErrBadAddress, setup: func(e *env) {
			e.d.AddRaw([]drivertest.PackedDesc{{Addr: e.bufBase - 1024, Len: 32, Flags: dInd}})
		}},
		{name: "indirect table wrapping the address space", size: 8, features: fIndirect, want: virtq.ErrBadAddress, setup: func(e *env) {
			e.d.AddRaw([]drivertest.PackedDesc{{Addr: ^uint64(0) - 15, Len: 32, Flags: dInd}})
		}},
		{name: "indirect table entry outside guest memory", size: 8, features: fIndirect, want: virtq.ErrBadAddress, setup: func(e *env) {
			tb := e.d.WriteTable([]drivertest.PackedDesc{{Addr: e.bufBase, Len: 10}, {Addr: 1 << 50, Len: 10, Flags: dWrite}})
			e.d.AddRaw([]drivertest.PackedDesc{{Addr: tb, Len: 32, Flags: dInd}})
		}},
		{name: "readable after writable in an indirect table", size: 8, features: fIndirect, want: virtq.ErrWriteBeforeRead, setup: func(e *env) {
			tb := e.d.WriteTable([]drivertest.PackedDesc{{Addr: e.bufBase, Len: 10, Flags: dWrite}, {Addr: e.bufBase, Len: 10}})
			e.d.AddRaw([]drivertest.PackedDesc{{Addr: tb, Len: 32, Flags: dInd}})
		}},
		{name: "indirect with NEXT", size: 8, features: fIndirect, want: virtq.ErrBadIndirect, setup: func(e *env) {
			tb := e.d.WriteTable([]drivertest.PackedDesc{{Addr: e.bufBase, Len: 10}})
			e.d.AddRaw([]drivertest.PackedDesc{{Addr: tb, Len: 16, Flags: dInd | dNext}, {Addr: e.bufBase, Len: 10}})
		}},
		{name: "indirect after a direct descriptor", size: 8, features: fIndirect, want: virtq.ErrBadIndirect, setup: func(e *env) {
			tb := e.d.WriteTable([]drivertest.PackedDesc{{Addr: e.bufBase, Len: 10}})
			e.d.AddRaw([]drivertest.PackedDesc{{Addr: e.bufBase, Len: 10, Flags: dNext}, {Addr: tb, Len: 16, Flags: dInd}})
		}},
		{name: "more slots available than the ring has", size: 4, want: virtq.ErrBadIndex, setup: func(e *env) {
			mustAdd(e, []drivertest.PackedBuf{{Addr: e.bufBase, Len: 10}, {Addr: e.bufBase, Len: 10}})
			mustAdd(e, []drivertest.PackedBuf{{Addr: e.bufBase, Len: 10}, {Addr: e.bufBase, Len: 10}})
			if e.pop(32) != 2 {
				e.t.Fatal("legit chains not popped")
			}
			// The driver reuses slot 0 though nothing was used.
			e.d.AddRaw([]drivertest.PackedDesc{{Addr: e.bufBase, Len: 10, ID: 2}})
		}},
		{name: "a bad chain after good ones in the same burst", size: 8, want: virtq.ErrBadAddress, setup: func(e *env) {
			mustAdd(e, []drivertest.PackedBuf{{Addr: e.bufBase, Len: 10}})
			mustAdd(e, []drivertest.PackedBuf{{Addr: e.bufBase, Len: 10}})
			e.d.AddRaw([]drivertest.PackedDesc{{Addr: 1 << 40, Len: 10, ID: 5}})
		}},
	}
	runHostile(t, cases)
}

// runHostile runs each case on a fresh ring: Pop must fail as the case
// says, pop nothing, leave the ring state as it was and the ring broken.
func runHostile(t *testing.T, cases []hostileCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, tc.size, tc.features, 8<<20)
			tc.setup(e)
			st, inflight := e.r.State(), e.r.InFlight()
			n, err := e.r.Pop(&e.b, virtq.MaxBurst)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Pop: %v, want %v", err, tc.want)
			}
			for _, a := range tc.also {
				if !errors.Is(err, a) {
					t.Fatalf("Pop: %v, want it to be %v too", err, a)
				}
			}
			t.Logf("Pop: %v", err)
			if n != 0 || e.b.N != 0 {
				t.Fatalf("failed Pop returned %d chains (burst holds %d)", n, e.b.N)
			}
			if e.r.State() != st || e.r.InFlight() != inflight {
				t.Fatalf("failed Pop moved the ring from %#x (%d in flight) to %#x (%d)", st, inflight, e.r.State(), e.r.InFlight())
			}
			assertBroken(t, e)
		})
		t.Run(tc.name+"/fill first", func(t *testing.T) {
			// The receive path's Fill before the Pop: it places what
			// Pop would have taken legitimately and stops before the
			// hostile descriptor, or finds it itself; either way the
			// ring fails as it does without it.
			e := newEnv(t, tc.size, tc.features, 8<<20)
			tc.setup(e)
			j := drivertest.FillJob(virtq.MaxBurst, func(int) int { return 1 })
			_, err := e.r.Fill(j)
			if err == nil {
				_, err = e.r.Pop(&e.b, virtq.MaxBurst)
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("Fill then Pop: %v, want %v", err, tc.want)
			}
			assertBroken(t, e)
		})
		t.Run(tc.name+"/take first", func(t *testing.T) {
			// The transmit path's Take before the Pop: it pops what
			// Pop would have taken legitimately and stops before the
			// hostile descriptor; the ring then fails as it does
			// without it.
			e := newEnv(t, tc.size, tc.features, 8<<20)
			tc.setup(e)
			var j virtq.TakeJob
			e.r.Take(&j, virtq.MaxBurst)
			if _, err := e.r.Pop(&e.b, virtq.MaxBurst); !errors.Is(err, tc.want) {
				t.Fatalf("Take then Pop: %v, want %v", err, tc.want)
			}
			assertBroken(t, e)
		})
	}
}

// assertBroken checks that every later call fails or does nothing.
func assertBroken(t *testing.T, e *env) {
	t.Helper()
	if _, err := e.r.Pop(&e.b, virtq.MaxBurst); !errors.Is(err, virtq.ErrBroken) {
		t.Fatalf("Pop after failure: %v, want ErrBroken", err)
	}
	if err := e.r.Push([]virtq.Used{{ID: 0, Descs: 1}}); !errors.Is(err, virtq.ErrBroken) {
		t.Fatalf("Push after failure: %v, want ErrBroken", err)
	}
	if e.r.NeedNotify() {
		t.Fatal("broken ring asks to notify")
	}
}

// TestPushNotInFlight: the switch returning an id it does not hold is a bug
// that must not reach the guest as a bogus used descriptor.
func TestPushNotInFlight(t *testing.T) {
	for _, f := range []uint64{0, fInOrder} {
		e := newEnv(t, 8, f, 1<<20)
		mustAdd(e, []drivertest.PackedBuf{{Addr: e.bufBase, Len: 10}})
		mustAdd(e, []drivertest.PackedBuf{{Addr: e.bufBase, Len: 10}})
		if e.pop(32) != 2 {
			t.Fatal("chains not popped")
		}
		if err := e.r.Push([]virtq.Used{{ID: 7, Descs: 1}}); !errors.Is(err, virtq.ErrUsedNotInFlight) {
			t.Fatalf("features %#x: push of id 7: %v", f, err)
		}
		assertBroken(t, e)

		// Pushing the same id twice, and with IN_ORDER out of order.
		e = newEnv(t, 8, f, 1<<20)
		a := mustAdd(e, []drivertest.PackedBuf{{Addr: e.bufBase, Len: 10}})
		b := mustAdd(e, []drivertest.PackedBuf{{Addr: e.bufBase, Len: 10}})
		e.pop(32)
		bad := []virtq.Used{{ID: a, Descs: 1}, {ID: a, Descs: 1}}
		if f&fInOrder != 0 {
			bad = []virtq.Used{{ID: b, Descs: 1}}
		}
		if err := e.r.Push(bad); !errors.Is(err, virtq.ErrUsedNotInFlight) {
			t.Fatalf("features %#x: push %v: %v", f, bad, err)
		}
		if f&fInOrder == 0 {
			// The valid first entry still reached the driver.
			got, err := e.d.Reap(nil)
			if err != nil || len(got) != 1 || got[0].ID != a {
				t.Fatalf("driver reaped %v, %v; want id %d", got, err, a)
			}
		}
		assertBroken(t, e)
	}
}

func mustAdd(e *env, bufs []drivertest.PackedBuf) uint16 {
	e.t.Helper()
	id, err := e.d.Add(bufs)
	if err != nil {
		e.t.Fatal(err)
	}
	return id
}

// completeAll pops every available chain, pushes them all as used with no
// bytes written, and reaps them.
func completeAll(e *env) {
	e.t.Helper()
	for {
		n := e.pop(virtq.MaxBurst)
		if n == 0 {
			break
		}
		var used []virtq.Used
		for i := 0; i < n; i++ {
			used = append(used, virtq.Used{ID: e.b.Chains[i].ID, Descs: e.b.Chains[i].Descs})
		}
		if err := e.r.Push(used); err != nil {
			e.t.Fatal(err)
		}
	}
	if _, err := e.d.Reap(nil); err != nil {
		e.t.Fatal(err)
	}
}

// TestPushClampsLen: a used length beyond the chain's writable bytes (a
// switch bug) reaches the guest as the writable size, never more.
func TestPushClampsLen(t *testing.T) {
	for _, f := range []uint64{0, fInOrder} {
		e := newEnv(t, 8, f, 1<<20)
		tx := mustAdd(e, []drivertest.PackedBuf{{Addr: e.bufBase, Len: 10}})
		rx := mustAdd(e, []drivertest.PackedBuf{{Addr: e.bufBase, Len: 10}, {Addr: e.bufBase + 64, Len: 100, Write: true}})
		if e.pop(32) != 2 {
			t.Fatal("chains not popped")
		}
		if err := e.r.Push([]virtq.Used{{ID: tx, Descs: 1, Len: 50}, {ID: rx, Descs: 2, Len: 5000}}); err != nil {
			t.Fatal(err)
		}
		got, err := e.d.Reap(nil)
		if err != nil || len(got) != 2 || got[0].Len != 0 || got[1].Len != 100 {
			t.Fatalf("features %#x: reaped %v, %v; want lengths 0 and 100", f, got, err)
		}
	}
}
