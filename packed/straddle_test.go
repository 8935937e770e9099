package packed_test

import (
	"bytes"
	"testing"

	"github.com/xvswitch/xvswitch/virtq"
	"github.com/xvswitch/xvswitch/virtq/drivertest"
)

// TestStraddle: buffers (and an indirect table) that cross from one guest
// region into the adjacent one come back as two segments holding the right
// bytes, and bytes the device writes land on both sides.
func TestStraddle(t *testing.T) {
	const regionSize = 1 << 20
	m, err := drivertest.NewAdjacentMem(regionSize)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	e := newEnvMem(t, m, 16, fIndirect)
	boundary := m.Regions[1].GuestAddr
	fill := func(gpa uint64, n int, seed byte) []byte {
		want := make([]byte, n)
		for i := range want {
			want[i] = seed + byte(i)
			copy(m.Bytes(gpa+uint64(i), 1), want[i:i+1])
		}
		return want
	}
	complete := func(id uint16, descs uint16, n uint32) {
		t.Helper()
		if err := e.r.Push([]virtq.Used{{ID: id, Descs: descs, Len: n}}); err != nil {
			t.Fatal(err)
		}
		got, err := e.d.Reap(nil)
		if err != nil || len(got) != 1 || got[0].ID != id || got[0].Len != n {
			t.Fatalf("reaped %v, %v", got, err)
		}
	}

	// A readable buffer of 100 bytes, 40 before the boundary.
	want := fill(boundary-40, 100, 1)
	id := mustAdd(e, []drivertest.PackedBuf{{Addr: boundary - 40, Len: 100}})
	if n := e.pop(virtq.MaxBurst); n != 1 || e.b.Chains[0].ID != id || e.b.Chains[0].ReadLen != 100 {
		t.Fatalf("popped %d", n)
	}
	if r := e.b.Readable(0); len(r) != 2 || len(r[0]) != 40 || len(r[1]) != 60 || !bytes.Equal(concat(r), want) {
		t.Fatalf("readable segments %v", r)
	}
	complete(id, 1, 0)

	// A writable buffer of 20 bytes, 7 before the boundary, behind a
	// readable one that does not cross.
	want = fill(boundary-4096, 10, 50)
	id = mustAdd(e, []drivertest.PackedBuf{{Addr: boundary - 4096, Len: 10}, {Addr: boundary - 7, Len: 20, Write: true}})
	if n := e.pop(virtq.MaxBurst); n != 1 || e.b.Chains[0].WriteLen != 20 || !bytes.Equal(concat(e.b.Readable(0)), want) {
		t.Fatalf("popped %d", n)
	}
	w := e.b.Writable(0)
	if len(w) != 2 || len(w[0]) != 7 || len(w[1]) != 13 {
		t.Fatalf("writable segments %v", w)
	}
	copy(w[0], "0123456")
	copy(w[1], "789abcdefghij")
	complete(id, 2, 20)
	if got := m.Bytes(boundary-7, 7); string(got) != "0123456" {
		t.Fatalf("written before the boundary: %q", got)
	}
	if got := m.Bytes(boundary, 13); string(got) != "789abcdefghij" {
		t.Fatalf("written after the boundary: %q", got)
	}

	// An indirect table of 2 entries, one on each side of the boundary.
	want = append(fill(boundary-8192, 30, 100), fill(boundary+8192, 40, 150)...)
	tb := boundary - 16
	for i, d := range []drivertest.PackedDesc{{Addr: boundary - 8192, Len: 30}, {Addr: boundary + 8192, Len: 40}} {
		var raw [16]byte
		putDesc(raw[:], d)
		copy(m.Bytes(tb+uint64(i)*16, 16), raw[:])
	}
	e.d.AddRaw([]drivertest.PackedDesc{{Addr: tb, Len: 32, ID: 9, Flags: drivertest.PackedIndirect}})
	if n := e.pop(virtq.MaxBurst); n != 1 || e.b.Chains[0].ID != 9 || e.b.Chains[0].Descs != 1 {
		t.Fatalf("popped %d", n)
	}
	if r := e.b.Readable(0); len(r) != 2 || !bytes.Equal(concat(r), want) {
		t.Fatalf("readable segments through a straddling table: %v", r)
	}
}

// TestBurstSegmentsFull: a chain whose segments do not fit in what is left
// of a burst ends the burst and comes first in the next one; a chain that
// cannot fit even in an empty burst fails the ring.
func TestBurstSegmentsFull(t *testing.T) {
	e := newEnv(t, 2048, 0, 8<<20)
	chain := func(n int) []drivertest.PackedBuf {
		bufs := make([]drivertest.PackedBuf, n)
		for i := range bufs {
			bufs[i] = drivertest.PackedBuf{Addr: e.bufBase + uint64(i)*8, Len: 8}
		}
		return bufs
	}
	a := mustAdd(e, chain(1000))
	b := mustAdd(e, chain(100))
	if n := e.pop(virtq.MaxBurst); n != 1 || e.b.Chains[0].ID != a || len(e.b.Readable(0)) != 1000 {
		t.Fatalf("first burst: %d chains", n)
	}
	if n := e.pop(virtq.MaxBurst); n != 1 || e.b.Chains[0].ID != b || len(e.b.Readable(0)) != 100 {
		t.Fatalf("second burst: %d chains", n)
	}

	// 600 buffers that each straddle two regions need 1200 segments.
	m, err := drivertest.NewAdjacentMem(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	e = newEnvMem(t, m, 1024, 0)
	bufs := make([]drivertest.PackedBuf, 600)
	for i := range bufs {
		bufs[i] = drivertest.PackedBuf{Addr: m.Regions[1].GuestAddr - 4, Len: 8}
	}
	mustAdd(e, bufs)
	if _, err := e.r.Pop(&e.b, virtq.MaxBurst); err == nil || !errorsIs(err, virtq.ErrChainTooLong) {
		t.Fatalf("Pop of a chain of 1200 segments: %v", err)
	}
}
