package vswitch

import "testing"

// TestFDBPerVLAN: one MAC in two VLANs is two entries, on their own ports;
// learning in one VLAN never moves the other's, and show fdb reads the
// VLAN back.
func TestFDBPerVLAN(t *testing.T) {
	var c Clock
	f := NewFDB(64, &c)
	a := mac(0x52, 0x54, 0, 0, 0, 1)
	f.Learn(FDBKey(10, a), 1)
	f.Learn(FDBKey(20, a), 2)
	if got := f.Lookup(FDBKey(10, a)); got != 1 {
		t.Fatalf("vlan 10: port %d, want 1", got)
	}
	if got := f.Lookup(FDBKey(20, a)); got != 2 {
		t.Fatalf("vlan 20: port %d, want 2", got)
	}
	if got := f.Lookup(a); got != NoPort {
		t.Fatalf("untagged: port %d, want none", got)
	}
	if err := f.AddStatic(FDBKey(4095, a), 3); err != nil {
		t.Fatal(err)
	}
	got := map[uint16]int{}
	for _, e := range f.Entries() {
		if e.MAC != a {
			t.Fatalf("entry %+v: mac %s", e, MACString(e.MAC))
		}
		got[e.VLAN] = e.Port
	}
	if len(got) != 3 || got[10] != 1 || got[20] != 2 || got[4095] != 3 {
		t.Fatalf("entries by vlan: %v", got)
	}
	f.Delete(FDBKey(10, a))
	if f.Lookup(FDBKey(10, a)) != NoPort || f.Lookup(FDBKey(20, a)) != 2 {
		t.Fatal("deleting vlan 10's entry touched vlan 20's")
	}
}

// TestFDBSlotGenerations: a slot reused for another key many times over
// never pairs a key with a port written for another (the generation
// check), and generations wrap without ever making a live key look empty.
func TestFDBSlotGenerations(t *testing.T) {
	var c Clock
	f := NewFDB(8, &c)
	a := mac(0x52, 0x54, 0, 0, 0, 9)
	for i := 0; i < 40; i++ {
		k := FDBKey(uint16(i%7), a)
		f.Learn(k, i%5)
		if got := f.Lookup(k); got != i%5 {
			t.Fatalf("round %d: port %d, want %d", i, got, i%5)
		}
		f.Delete(k)
		if got := f.Lookup(k); got != NoPort {
			t.Fatalf("round %d: deleted key still on %d", i, got)
		}
	}
}
