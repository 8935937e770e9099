package vswitch

import (
	"math/rand"
	"sync"
	"testing"
)

func mac(b ...byte) uint64 { return MACKey(b) }

func TestFDBLearnLookupMove(t *testing.T) {
	var c Clock
	f := NewFDB(64, &c)
	a := mac(0x52, 0x54, 0, 0, 0, 1)
	if got := f.Lookup(a); got != NoPort {
		t.Fatalf("empty table: got port %d", got)
	}
	f.Learn(a, 3)
	if got := f.Lookup(a); got != 3 {
		t.Fatalf("learned on 3, got %d", got)
	}
	f.Learn(a, 5) // the VM migrated, or a loop: the newest port wins
	if got := f.Lookup(a); got != 5 {
		t.Fatalf("moved to 5, got %d", got)
	}
	if f.Len() != 1 {
		t.Fatalf("len %d, want 1", f.Len())
	}
	// Group addresses and the zero MAC are never learned.
	f.Learn(mac(0xff, 0xff, 0xff, 0xff, 0xff, 0xff), 1)
	f.Learn(mac(0x01, 0x00, 0x5e, 0, 0, 1), 1)
	f.Learn(0, 1)
	if f.Len() != 1 {
		t.Fatalf("group or zero MAC learned: len %d", f.Len())
	}
	if s := MACString(a); s != "52:54:00:00:00:01" {
		t.Fatalf("MACString = %s", s)
	}
}

func TestFDBAgingAndStatic(t *testing.T) {
	var c Clock
	f := NewFDB(64, &c)
	learned, pinned := mac(2, 0, 0, 0, 0, 1), mac(2, 0, 0, 0, 0, 2)
	f.Learn(learned, 1)
	if err := f.AddStatic(pinned, 2); err != nil {
		t.Fatal(err)
	}
	f.Learn(pinned, 7) // learning never moves a static entry
	if got := f.Lookup(pinned); got != 2 {
		t.Fatalf("static entry moved to %d", got)
	}
	c.Set(299)
	if n := f.Age(300); n != 0 {
		t.Fatalf("aged %d entries before 300 s", n)
	}
	c.Set(300)
	if n := f.Age(300); n != 1 {
		t.Fatalf("aged %d entries at 300 s, want 1", n)
	}
	if f.Lookup(learned) != NoPort || f.Lookup(pinned) != 2 {
		t.Fatalf("after aging: learned -> %d, static -> %d", f.Lookup(learned), f.Lookup(pinned))
	}
	// Seen again refreshes the age.
	f.Learn(learned, 1)
	c.Set(500)
	f.Learn(learned, 1)
	c.Set(700)
	if n := f.Age(300); n != 0 {
		t.Fatalf("refreshed entry aged out")
	}
	if n := f.FlushPort(2); n != 1 || f.Lookup(pinned) != NoPort {
		t.Fatalf("FlushPort removed %d", n)
	}
}

func TestFDBFullAndTombstones(t *testing.T) {
	var c Clock
	f := NewFDB(8, &c) // 16 slots, 8 usable
	for i := 0; i < 8; i++ {
		if err := f.AddStatic(mac(2, 0, 0, 0, 1, byte(i)), i); err != nil {
			t.Fatalf("entry %d: %v", i, err)
		}
	}
	if err := f.AddStatic(mac(2, 0, 0, 0, 2, 0), 1); err != ErrFDBFull {
		t.Fatalf("9th entry: %v, want ErrFDBFull", err)
	}
	f.Learn(mac(2, 0, 0, 0, 2, 1), 1)
	if f.Refused() != 2 {
		t.Fatalf("refused %d, want 2", f.Refused())
	}
	// Churn: delete and re-add many times; lookups stay right and the
	// table never reports full while live entries are few.
	for round := 0; round < 100; round++ {
		for i := 0; i < 8; i++ {
			f.Delete(mac(2, 0, 0, 0, 1, byte(i)))
		}
		f.Age(0)
		for i := 0; i < 8; i++ {
			if err := f.AddStatic(mac(2, 0, 0, 0, 1, byte(i)), i+round); err != nil {
				t.Fatalf("round %d entry %d: %v", round, i, err)
			}
		}
		for i := 0; i < 8; i++ {
			if got := f.Lookup(mac(2, 0, 0, 0, 1, byte(i))); got != i+round {
				t.Fatalf("round %d entry %d: port %d", round, i, got)
			}
		}
	}
}

func TestFDBConcurrentReadersAndLearners(t *testing.T) {
	var c Clock
	f := NewFDB(4096, &c)
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			r := rand.New(rand.NewSource(int64(w)))
			for i := 0; i < 20000; i++ {
				k := mac(2, 0, 0, byte(w), 0, byte(r.Intn(200)))
				f.Learn(k, w)
				if p := f.Lookup(k); p != w && p != NoPort {
					t.Errorf("worker %d: MAC only it learns maps to %d", w, p)
					return
				}
			}
		}(w)
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < 200; i++ {
			c.Set(uint32(i))
			f.Age(50)
		}
	}()
	wg.Wait()
}

func TestFDBLookupAllocs(t *testing.T) {
	var c Clock
	f := NewFDB(64, &c)
	k := mac(2, 0, 0, 0, 0, 9)
	f.Learn(k, 1)
	if n := testing.AllocsPerRun(1000, func() { f.Learn(k, 1); _ = f.Lookup(k) }); n != 0 {
		t.Fatalf("%v allocs per learn+lookup", n)
	}
}

func BenchmarkFDBLookupHit(b *testing.B) {
	var c Clock
	f := NewFDB(1024, &c)
	keys := make([]uint64, 512)
	for i := range keys {
		keys[i] = mac(2, 0, 0, 0, byte(i>>8), byte(i))
		f.Learn(keys[i], i%8)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		k := keys[i&511]
		f.Learn(k, i&511%8)
		_ = f.Lookup(k)
	}
}

// TestHeaderKeys: an Ethernet header's keys are MACKey's of its two MACs,
// whatever the bytes after them.
func TestHeaderKeys(t *testing.T) {
	h := []byte{0x02, 0x11, 0x22, 0x33, 0x44, 0x55, 0xfe, 0xdc, 0xba, 0x98, 0x76, 0x54, 0x81, 0x00, 0xff}
	src, dst := headerKeys(h[:14])
	if src != MACKey(h[6:12]) || dst != MACKey(h[0:6]) || src != 0xfedcba987654 || dst != 0x021122334455 {
		t.Errorf("headerKeys: src %012x dst %012x", src, dst)
	}
}
