package vswitch

import (
	"bytes"
	"testing"
)

// TestBridgeRemembersOneBurst: within a burst a frame with the previous
// frame's MACs goes where that one went; any other pair is decided by the
// FDB; and what was remembered is gone at the next burst, so a MAC that
// moved in between is followed at once.
func TestBridgeRemembersOneBurst(t *testing.T) {
	s, err := New(Config{Workers: 1, Ctl: "x"})
	if err != nil {
		t.Fatal(err)
	}
	a, b, c := newFakePort(), newFakePort(), newFakePort()
	for i, f := range []*fakePort{a, b, c} {
		if _, err := s.addPort(string(rune('a'+i)), f, 0); err != nil {
			t.Fatal(err)
		}
	}
	const macA, macB, macC = 0x0200_0000_000a, 0x0200_0000_000b, 0x0200_0000_000c
	s.fdb.Learn(macB, 1)
	w := s.workers[0]
	burst := func(frames ...[]byte) {
		t.Helper()
		a.put(frames...)
		snap := s.snap.Load()
		if n, err := w.forward(snap, snap.polls[0][0]); n != len(frames) || err != nil {
			t.Fatalf("forwarded %d, %v", n, err)
		}
	}
	toB, toC, toA := ethFrame(macB, macA, "b"), ethFrame(macC, macA, "c"), ethFrame(macA, macA, "a")
	// B is known, C is not (flooded to b and c), A was learned on a by
	// the first frame (hairpin).
	burst(toB, toB, toC, toC, toB, toA, toA, toB)
	want := func(f *fakePort, name string, frames ...[]byte) {
		t.Helper()
		got := f.frames()
		if len(got) != len(frames) {
			t.Fatalf("%s got %d frames, want %d", name, len(got), len(frames))
		}
		for i := range got {
			if !bytes.Equal(got[i], frames[i]) {
				t.Fatalf("%s frame %d: %q, want %q", name, i, got[i], frames[i])
			}
		}
	}
	want(b, "b", toB, toB, toC, toC, toB, toB)
	want(c, "c", toC, toC)
	if d := s.Stats()[0].Drops["hairpin"]; d != 2 {
		t.Fatalf("%d hairpin drops, want 2", d)
	}
	// B moves to c between bursts: the next burst follows it from its
	// first frame, with the same MACs as the last burst's last frame.
	s.fdb.Learn(macB, 2)
	burst(toB, toB)
	want(b, "b", toB, toB, toC, toC, toB, toB)
	want(c, "c", toC, toC, toB, toB)
}
