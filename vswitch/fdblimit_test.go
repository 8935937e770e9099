package vswitch

import (
	"sync"
	"testing"
)

func learnedCount(f *FDB, port int) int {
	n := 0
	for _, e := range f.Entries() {
		if e.Port == port && !e.Static {
			n++
		}
	}
	return n
}

// TestFDBPortLimit: a port learns at most its limit; static entries do not
// count; a known MAC seen again is not refused; entries that age out,
// move away or are flushed free their places; a MAC does not move onto a
// port at its limit.
func TestFDBPortLimit(t *testing.T) {
	var c Clock
	f := NewFDB(64, &c)
	f.SetLimit(1, 2)
	for i := byte(0); i < 4; i++ {
		f.Learn(mac(2, 0, 0, 0, 1, i), 1)
	}
	if n, r := learnedCount(f, 1), f.LearnRefused(1); n != 2 || r != 2 {
		t.Fatalf("learned %d, refused %d; want 2, 2", n, r)
	}
	if err := f.AddStatic(mac(2, 0, 0, 0, 1, 9), 1); err != nil {
		t.Fatalf("a static entry over the limit: %v", err)
	}
	f.Learn(mac(2, 0, 0, 0, 1, 0), 1) // known: refreshed, not refused
	if r := f.LearnRefused(1); r != 2 {
		t.Fatalf("refused %d after a known MAC, want 2", r)
	}
	// Port 2 has no limit; its MAC does not move onto port 1, at its limit.
	other := mac(2, 0, 0, 0, 2, 0)
	f.Learn(other, 2)
	f.Learn(other, 1)
	if p := f.Lookup(other); p != 2 || f.LearnRefused(1) != 3 {
		t.Fatalf("moved onto a full port: on %d, refused %d", p, f.LearnRefused(1))
	}
	// One of port 1's MACs moves to port 2: port 1 has room again.
	f.Learn(mac(2, 0, 0, 0, 1, 0), 2)
	f.Learn(mac(2, 0, 0, 0, 1, 5), 1)
	if p := f.Lookup(mac(2, 0, 0, 0, 1, 5)); p != 1 {
		t.Fatalf("after a move away: new MAC on %d, want 1", p)
	}
	// Aging frees places too.
	c.Set(400)
	f.Learn(mac(2, 0, 0, 0, 1, 1), 1) // still seen: keeps its place
	f.Age(300)
	f.Learn(mac(2, 0, 0, 0, 1, 6), 1)
	if n := learnedCount(f, 1); n != 2 || f.Lookup(mac(2, 0, 0, 0, 1, 6)) != 1 {
		t.Fatalf("after aging: %d learned on 1, new MAC on %d", n, f.Lookup(mac(2, 0, 0, 0, 1, 6)))
	}
	// A port index taken again starts afresh; one given a limit with
	// entries already there counts them.
	f.FlushPort(1)
	f.SetLimit(1, 1)
	f.Learn(mac(2, 0, 0, 0, 1, 7), 1)
	if n, r := learnedCount(f, 1), f.LearnRefused(1); n != 1 || r != 0 {
		t.Fatalf("after flush: learned %d, refused %d", n, r)
	}
	f.Learn(mac(2, 0, 0, 0, 3, 0), 3)
	f.Learn(mac(2, 0, 0, 0, 3, 1), 3)
	f.SetLimit(3, 1) // port 3 already holds two learned MACs
	f.Learn(mac(2, 0, 0, 0, 3, 2), 3)
	if p := f.Lookup(mac(2, 0, 0, 0, 3, 2)); p != NoPort || f.LearnRefused(3) != 1 {
		t.Fatalf("limit set below what the port holds: new MAC on %d", p)
	}
	f.Delete(mac(2, 0, 0, 0, 3, 0))
	f.Learn(mac(2, 0, 0, 0, 3, 2), 3)
	if p := f.Lookup(mac(2, 0, 0, 0, 3, 2)); p != NoPort {
		t.Fatalf("one of two deleted, limit 1: new MAC learned on %d", p)
	}
}

// TestFDBPortLimitConcurrent: two workers polling queues of one port learn
// at once; together they never exceed its limit.
func TestFDBPortLimitConcurrent(t *testing.T) {
	var c Clock
	f := NewFDB(4096, &c)
	f.SetLimit(0, 10)
	var wg sync.WaitGroup
	for w := 0; w < 2; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < 1000; i++ {
				f.Learn(mac(2, 0, 0, byte(w), byte(i>>8), byte(i)), 0)
			}
		}(w)
	}
	wg.Wait()
	if n, r := learnedCount(f, 0), f.LearnRefused(0); n != 10 || r != 2000-10 {
		t.Fatalf("learned %d, refused %d; want 10, 1990", n, r)
	}
}

// TestFDBRefusedLearnAllocs: a port at its limit sending new MACs costs no
// allocation (and, by construction, not the FDB's mutex).
func TestFDBRefusedLearnAllocs(t *testing.T) {
	var c Clock
	f := NewFDB(64, &c)
	f.SetLimit(1, 1)
	f.Learn(mac(2, 0, 0, 0, 0, 1), 1)
	i := 0
	if n := testing.AllocsPerRun(1000, func() { i++; f.Learn(mac(2, 0, 0, 1, byte(i>>8), byte(i)), 1) }); n != 0 {
		t.Fatalf("%v allocs per refused learn", n)
	}
	if f.LearnRefused(1) != 1001 {
		t.Fatalf("refused %d, want 1001", f.LearnRefused(1))
	}
}
