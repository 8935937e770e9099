package packed_test

import (
	"testing"

	"github.com/xvswitch/xvswitch/virtq"
	"github.com/xvswitch/xvswitch/virtq/drivertest"
)

// TestZeroLengthDropsChain: a descriptor of length 0 (alone, in a NEXT
// chain, in an indirect table) makes its chain Malformed, popped with no
// segments and no bytes, instead of breaking the ring, as DPDK's back-end
// tolerates it. The chains around it in the same burst are intact, the
// malformed one goes back to the driver like any other, and the ring goes
// on.
func TestZeroLengthDropsChain(t *testing.T) {
	cases := []struct {
		name     string
		features uint64
		bufs     []drivertest.PackedBuf
		indirect bool
		slots    uint16
	}{
		{name: "alone", bufs: []drivertest.PackedBuf{{Len: 0}}, slots: 1},
		{name: "first of a chain", bufs: []drivertest.PackedBuf{{Len: 0}, {Len: 10}}, slots: 2},
		{name: "last of a chain", bufs: []drivertest.PackedBuf{{Len: 10}, {Len: 0, Write: true}}, slots: 2},
		{name: "in an indirect table", features: fIndirect, indirect: true,
			bufs: []drivertest.PackedBuf{{Len: 10}, {Len: 0}, {Len: 10, Write: true}}, slots: 1},
	}
	for _, tc := range cases {
		for _, inOrder := range []uint64{0, fInOrder} {
			t.Run(tc.name, func(t *testing.T) {
				e := newEnv(t, 8, tc.features|inOrder, 1<<20)
				good := []drivertest.PackedBuf{{Addr: e.bufBase, Len: 10}}
				before := mustAdd(e, good)
				bufs := append([]drivertest.PackedBuf(nil), tc.bufs...)
				for i := range bufs {
					bufs[i].Addr = e.bufBase + 64*uint64(i+1)
				}
				var bad uint16
				var err error
				if tc.indirect {
					bad, err = e.d.AddIndirect(bufs)
				} else {
					bad, err = e.d.Add(bufs)
				}
				if err != nil {
					t.Fatal(err)
				}
				after := mustAdd(e, good)
				if n := e.pop(virtq.MaxBurst); n != 3 {
					t.Fatalf("popped %d chains, want 3", n)
				}
				for i, id := range []uint16{before, bad, after} {
					c := e.b.Chains[i]
					if c.ID != id {
						t.Fatalf("chain %d: id %d, want %d", i, c.ID, id)
					}
					if i != 1 {
						if c.Malformed || c.ReadLen != 10 || len(e.b.Readable(i)) != 1 {
							t.Fatalf("good chain %d: %+v", i, c)
						}
						continue
					}
					if !c.Malformed || c.ReadLen != 0 || c.WriteLen != 0 || len(e.b.Readable(i)) != 0 || len(e.b.Writable(i)) != 0 || c.Descs != tc.slots {
						t.Fatalf("chain with a zero-length descriptor: %+v, %d readable and %d writable segments; want Malformed, empty, %d slots",
							c, len(e.b.Readable(i)), len(e.b.Writable(i)), tc.slots)
					}
				}
				used := make([]virtq.Used, 3)
				for i := range used {
					used[i] = virtq.Used{ID: e.b.Chains[i].ID, Descs: e.b.Chains[i].Descs}
				}
				if err := e.r.Push(used); err != nil {
					t.Fatal(err)
				}
				got, err := e.d.Reap(nil)
				if err != nil || len(got) != 3 || got[1].ID != bad || got[1].Len != 0 {
					t.Fatalf("driver reaped %+v, %v; want 3 with id %d unwritten", got, err, bad)
				}
				// Not broken: the next chain pops as usual.
				next := mustAdd(e, good)
				if n := e.pop(virtq.MaxBurst); n != 1 || e.b.Chains[0].ID != next || e.b.Chains[0].Malformed {
					t.Fatalf("after the malformed chain: popped %d, %+v", n, e.b.Chains[0])
				}
			})
		}
	}
}
