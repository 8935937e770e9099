package vswitch

import (
	"math/rand"
	"testing"
)

// TestAddrTable: random puts and takes agree with a map, and allocate
// nothing.
func TestAddrTable(t *testing.T) {
	var tab addrTable
	ref := map[uint64]uint16{}
	rng := rand.New(rand.NewSource(1))
	var keys []uint64
	for i := 0; i < 200000; i++ {
		if len(ref) < maxLent && (len(keys) == 0 || rng.Intn(2) == 0) {
			a := uint64(4<<20) + uint64(rng.Intn(1<<20))*2048 + 12
			if _, ok := ref[a]; ok {
				continue
			}
			id := uint16(rng.Intn(1 << 16))
			tab.put(a, id)
			ref[a] = id
			keys = append(keys, a)
			continue
		}
		j := rng.Intn(len(keys))
		a := keys[j]
		keys[j] = keys[len(keys)-1]
		keys = keys[:len(keys)-1]
		id, ok := tab.take(a)
		if !ok || id != ref[a] {
			t.Fatalf("take %#x = %d, %v; want %d", a, id, ok, ref[a])
		}
		delete(ref, a)
		if _, ok := tab.take(a); ok {
			t.Fatalf("%#x taken twice", a)
		}
	}
	if n := testing.AllocsPerRun(100, func() { tab.put(1<<40, 7); tab.take(1 << 40) }); n != 0 {
		t.Fatalf("%v allocations", n)
	}
}
