package packed_test

import (
	"testing"

	"github.com/xvswitch/xvswitch/virtq/drivertest"
)

// TestReadOnlyRing: on a ring the device only reads (a virtio-net transmit
// queue), WRITE flags are ignored. DPDK 22.11 sends indirect tables whose
// header descriptor is flagged WRITE; such a chain must come back whole
// and readable, where a normal ring refuses it.
func TestReadOnlyRing(t *testing.T) {
	e := newEnv(t, 8, fIndirect, 1<<16)
	e.readOnly()
	copy(e.m.Bytes(e.bufBase, 22), "0123456789abcdefghijkl")
	tb := e.d.WriteTable([]drivertest.PackedDesc{{Addr: e.bufBase, Len: 12, Flags: dWrite}, {Addr: e.bufBase + 12, Len: 10}})
	e.d.AddRaw([]drivertest.PackedDesc{{Addr: tb, Len: 32, Flags: dInd}})
	if n := e.pop(32); n != 1 {
		t.Fatalf("popped %d chains", n)
	}
	c := e.b.Chains[0]
	if c.ReadLen != 22 || c.WriteLen != 0 || string(concat(e.b.Readable(0))) != "0123456789abcdefghijkl" {
		t.Fatalf("chain: read %d write %d bytes %q", c.ReadLen, c.WriteLen, concat(e.b.Readable(0)))
	}
}
