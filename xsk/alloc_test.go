package xsk

import "testing"

func TestFrameAlloc(t *testing.T) {
	const fs = 2048
	a := newFrameAlloc(fs, 10, 70) // frames 10..79
	if a.free() != 70 {
		t.Fatalf("free %d", a.free())
	}
	first, _ := a.get()
	if first != 10*fs {
		t.Fatalf("first frame %d, want lowest %d", first, 10*fs)
	}
	got := []uint64{first}
	for {
		f, ok := a.get()
		if !ok {
			break
		}
		got = append(got, f)
	}
	if len(got) != 70 || a.free() != 0 {
		t.Fatalf("got %d frames", len(got))
	}
	seen := map[uint64]bool{}
	for _, f := range got {
		if f%fs != 0 || f < 10*fs || f >= 80*fs || seen[f] {
			t.Fatalf("bad or duplicate frame %d", f)
		}
		seen[f] = true
	}
	// Put back by an address inside the frame (RX data sits after headroom).
	if !a.put(got[5] + 256 + 14) {
		t.Fatal("put of an inner address refused")
	}
	if a.put(got[5]) {
		t.Fatal("double free accepted")
	}
	if a.put(9*fs) || a.put(80*fs) || a.put(1<<40) {
		t.Fatal("foreign frame accepted")
	}
	if a.rejected != 4 {
		t.Fatalf("rejected %d, want 4", a.rejected)
	}
	if f, _ := a.get(); f != got[5] {
		t.Fatalf("get after put returned %d, want %d", f, got[5])
	}
	for _, f := range got {
		a.put(f)
	}
	if a.free() != 70 {
		t.Fatalf("free %d after returning all", a.free())
	}
}

func TestTXFIFO(t *testing.T) {
	f := newTXFIFO(5) // rounds up to 8
	if f.space() != 8 {
		t.Fatalf("space %d", f.space())
	}
	f.head, f.tail = 1<<32-3, 1<<32-3 // wrap during the test
	for i := range uint64(8) {
		f.push(i)
	}
	if f.space() != 0 || f.len() != 8 {
		t.Fatalf("len %d space %d", f.len(), f.space())
	}
	for i := range uint64(8) {
		v, ok := f.pop()
		if !ok || v != i {
			t.Fatalf("pop %d: %d %v", i, v, ok)
		}
	}
	if _, ok := f.pop(); ok {
		t.Fatal("pop from empty")
	}
}
