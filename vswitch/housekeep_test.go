package vswitch

import (
	"testing"
	"time"
)

// TestHousekeepingIdle: with its workers asleep the switch has no tick,
// yet a learned MAC still ages out on time (the housekeeper sleeps until
// its expiry), and a worker woken by a frame after a long sleep learns
// with the current second, not the one the clock stood at.
func TestHousekeepingIdle(t *testing.T) {
	s := startTestSwitch(t, Config{Workers: 1, FDBAge: 2 * time.Second})
	a, b := newFakePort(), newFakePort()
	s.addPort("a", a, 0)
	s.addPort("b", b, 0)
	const macA = 0x0200_0000_000a
	a.put(ethFrame(bcast, macA, "hello"))
	waitFor(t, "the flood", func() bool { return len(b.frames()) == 1 })
	if s.fdb.Lookup(macA) != 0 {
		t.Fatal("A not learned")
	}
	sleeping(t, s)
	// Learned at second s0, gone by s0+2 (give the clock one more).
	waitFor(t, "A aged out", func() bool { return s.fdb.Lookup(macA) == NoPort })
	if got := time.Since(s.start); got < 2*time.Second {
		t.Fatalf("A aged out after %v, before its 2 s", got)
	}
	// Asleep again, long enough for the clock to be stale without a tick.
	sleeping(t, s)
	time.Sleep(2500 * time.Millisecond)
	a.put(ethFrame(bcast, macA, "again"))
	waitFor(t, "the second flood", func() bool { return len(b.frames()) == 2 })
	// A second later A must still be there (a timestamp from the stale
	// clock ages it out at once), and about a second old.
	time.Sleep(1100 * time.Millisecond)
	s.clock.Advance(s.seconds())
	if s.fdb.Lookup(macA) != 0 {
		t.Fatal("A, seen a second ago, aged out: it was learned with a stale clock")
	}
	for _, e := range s.fdb.Entries() {
		if e.MAC == macA && e.Age > 2 {
			t.Fatalf("A was learned %d s ago by the clock, about 1 s ago really", e.Age)
		}
	}
}
