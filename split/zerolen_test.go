package split_test

import (
	"testing"

	"github.com/xvswitch/xvswitch/split"
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
	type buf = drivertest.SplitBuf
	cases := []struct {
		name         string
		direct, tail []buf
		descs        uint16
	}{
		{name: "alone", direct: []buf{{Len: 0}}, descs: 1},
		{name: "first of a chain", direct: []buf{{Len: 0}, {Len: 10}}, descs: 2},
		{name: "last of a chain", direct: []buf{{Len: 10}, {Len: 0, Write: true}}, descs: 2},
		{name: "in an indirect table", direct: []buf{{Len: 10}}, tail: []buf{{Len: 10}, {Len: 0}, {Len: 10, Write: true}}, descs: 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := newMem(t, 1<<20, 1<<20)
			d := drivertest.NewSplitDriver(m, 0, 8)
			r, err := split.New(d.Config(featAll))
			if err != nil {
				t.Fatal(err)
			}
			data := m.Alloc(1, 4096, 64)
			place := func(bs []buf) []buf {
				out := append([]buf(nil), bs...)
				for i := range out {
					out[i].Addr = data + 64*uint64(i)
				}
				return out
			}
			good := []buf{{Addr: data, Len: 10}}
			add := func(direct, tail []buf) uint16 {
				id, err := d.AddChain(direct, tail)
				if err != nil {
					t.Fatal(err)
				}
				return id
			}
			before := add(good, nil)
			bad := add(place(tc.direct), place(tc.tail))
			after := add(good, nil)
			d.Publish()
			var b virtq.Burst
			if n, err := r.Pop(&b, virtq.MaxBurst); n != 3 || err != nil {
				t.Fatalf("Pop: %d, %v; want 3 chains", n, err)
			}
			for i, id := range []uint16{before, bad, after} {
				c := b.Chains[i]
				if c.ID != id {
					t.Fatalf("chain %d: id %d, want %d", i, c.ID, id)
				}
				if i != 1 {
					if c.Malformed || c.ReadLen != 10 || len(b.Readable(i)) != 1 {
						t.Fatalf("good chain %d: %+v", i, c)
					}
					continue
				}
				if !c.Malformed || c.ReadLen != 0 || c.WriteLen != 0 || len(b.Readable(i)) != 0 || len(b.Writable(i)) != 0 || c.Descs != tc.descs {
					t.Fatalf("chain with a zero-length descriptor: %+v, %d readable and %d writable segments; want Malformed, empty, %d descriptors",
						c, len(b.Readable(i)), len(b.Writable(i)), tc.descs)
				}
			}
			used := make([]virtq.Used, 3)
			for i := range used {
				used[i] = virtq.Used{ID: b.Chains[i].ID, Descs: b.Chains[i].Descs}
			}
			if err := r.Push(used); err != nil {
				t.Fatal(err)
			}
			for i, id := range []uint16{before, bad, after} {
				u, ok, err := d.Reap()
				if err != nil || !ok || u.ID != id || u.Len != 0 {
					t.Fatalf("reap %d: %+v %v %v; want id %d unwritten", i, u, ok, err, id)
				}
			}
			// Not broken: the next chain pops as usual.
			next := add(good, nil)
			d.Publish()
			if n, err := r.Pop(&b, virtq.MaxBurst); n != 1 || err != nil || b.Chains[0].ID != next || b.Chains[0].Malformed {
				t.Fatalf("after the malformed chain: popped %d (%v), %+v", n, err, b.Chains[0])
			}
		})
	}
}
