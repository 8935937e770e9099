package split_test

import (
	"testing"

	"github.com/xvswitch/xvswitch/split"
	"github.com/xvswitch/xvswitch/virtq"
	"github.com/xvswitch/xvswitch/virtq/drivertest"
)

// TestReadOnlyRing: on a ring the device only reads (a virtio-net transmit
// queue), WRITE flags are ignored, so a chain a normal ring refuses
// (readable after writable) comes back whole and readable.
func TestReadOnlyRing(t *testing.T) {
	m := newMem(t, 1<<20, 1<<16)
	d := drivertest.NewSplitDriver(m, 0, 8)
	buf := m.Regions[1].GuestAddr
	copy(m.Bytes(buf, 22), "0123456789abcdefghijkl")
	d.WriteDesc(0, buf, 12, drivertest.SplitFNext|drivertest.SplitFWrite, 1)
	d.WriteDesc(1, buf+12, 10, 0, 0)
	d.WriteAvail(0, 0)
	d.PublishIdx(1)
	cfg := d.Config(0)
	cfg.ReadOnly = true
	r, err := split.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var b virtq.Burst
	n, err := r.Pop(&b, 32)
	if err != nil || n != 1 {
		t.Fatalf("Pop: %d, %v", n, err)
	}
	c := b.Chains[0]
	var got []byte
	for _, s := range b.Readable(0) {
		got = append(got, s...)
	}
	if c.ReadLen != 22 || c.WriteLen != 0 || string(got) != "0123456789abcdefghijkl" {
		t.Fatalf("chain: read %d write %d bytes %q", c.ReadLen, c.WriteLen, got)
	}
}
