package packed_test

import (
	"errors"
	"testing"

	"github.com/xvswitch/xvswitch/guestmem"
	"github.com/xvswitch/xvswitch/packed"
	"github.com/xvswitch/xvswitch/virtq"
	"github.com/xvswitch/xvswitch/virtq/drivertest"
)

func TestNewRejects(t *testing.T) {
	m, err := drivertest.NewMem(1<<20, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	d := drivertest.NewPackedDriver(m, 0, 256)
	good := d.Config(fIndirect)
	cases := []struct {
		name string
		mod  func(c *virtq.Config)
		also error
	}{
		{"no memory", func(c *virtq.Config) { c.Mem = nil }, nil},
		{"size 0", func(c *virtq.Config) { c.Size = 0 }, nil},
		{"size 32769", func(c *virtq.Config) { c.Size = 32769 }, nil},
		{"size 65535", func(c *virtq.Config) { c.Size = 65535 }, nil},
		{"descriptor ring misaligned", func(c *virtq.Config) { c.Desc += 8 }, guestmem.ErrMisaligned},
		{"descriptor ring past its region", func(c *virtq.Config) { c.Desc = m.User(m.Regions[0].GuestAddr+m.Regions[0].Size) - 16*255 }, guestmem.ErrOutOfBounds},
		{"descriptor ring given as a guest physical address", func(c *virtq.Config) { c.Desc = d.DescAddr }, guestmem.ErrOutOfBounds},
		{"driver area misaligned", func(c *virtq.Config) { c.Driver += 2 }, guestmem.ErrMisaligned},
		{"driver area outside memory", func(c *virtq.Config) { c.Driver = 4 }, guestmem.ErrOutOfBounds},
		{"device area misaligned", func(c *virtq.Config) { c.Device += 1 }, guestmem.ErrMisaligned},
		{"device area at the last 2 bytes of a region", func(c *virtq.Config) { c.Device = m.User(m.Regions[0].GuestAddr+m.Regions[0].Size) - 2 }, nil},
		{"avail index = size", func(c *virtq.Config) { c.Base = 256 | 1<<15 }, nil},
		{"used index = size", func(c *virtq.Config) { c.Base = 1<<15 | 256<<16 }, nil},
		{"avail index 0x7fff", func(c *virtq.Config) { c.Base = 0x7fff }, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := good
			tc.mod(&c)
			r, err := packed.New(c)
			if !errors.Is(err, virtq.ErrBadConfig) || r != nil {
				t.Fatalf("New: %v, %v; want ErrBadConfig", r, err)
			}
			if tc.also != nil && !errors.Is(err, tc.also) {
				t.Fatalf("New: %v; want it to be %v too", err, tc.also)
			}
		})
	}
	if _, err := packed.New(good); err != nil {
		t.Fatalf("good config: %v", err)
	}
}

// TestStateEncoding: any valid state survives New -> State, and sizes that
// are not powers of two (and the largest) are accepted.
func TestStateEncoding(t *testing.T) {
	m, err := drivertest.NewMem(1<<20, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	for _, size := range []uint16{1, 2, 3, 255, 256, 1000, 1024, 32768} {
		cfg := virtq.Config{Mem: m.Memory, Size: size,
			Desc:   m.User(m.Regions[0].GuestAddr),
			Driver: m.User(m.Regions[0].GuestAddr + 16*uint64(size)),
			Device: m.User(m.Regions[0].GuestAddr + 16*uint64(size) + 4),
		}
		for _, base := range []uint32{
			packed.InitialState,
			0,
			state(size-1, false, 0, true),
			state(0, true, size-1, false),
			state(size/2, false, size/3, false),
			state(size-1, true, size-1, true),
		} {
			cfg.Base = base
			r, err := packed.New(cfg)
			if err != nil {
				t.Fatalf("size %d base %#x: %v", size, base, err)
			}
			if r.State() != base || r.InFlight() != 0 || r.Size() != int(size) {
				t.Fatalf("size %d: base %#x came back as %#x", size, base, r.State())
			}
		}
	}
	if packed.InitialState != drivertest.PackedInitialBase {
		t.Fatalf("InitialState %#x, driver model starts at %#x", packed.InitialState, drivertest.PackedInitialBase)
	}
}

// TestRestoreMidStream saves and restores while the driver has chains
// available that the device has not popped yet: the new ring must pick
// them up where the old one stopped, and keep the used positions.
func TestRestoreMidStream(t *testing.T) {
	e := newEnv(t, 5, 0, 1<<20)
	var ids []uint16
	for round := 0; round < 12; round++ {
		ids = ids[:0]
		for i := 0; i < 3; i++ {
			ids = append(ids, mustAdd(e, []drivertest.PackedBuf{{Addr: e.bufBase + uint64(i)*64, Len: 64}}))
		}
		if n := e.pop(2); n != 2 {
			t.Fatalf("popped %d", n)
		}
		if err := e.r.Push([]virtq.Used{{ID: e.b.Chains[1].ID, Descs: 1}, {ID: e.b.Chains[0].ID, Descs: 1}}); err != nil {
			t.Fatal(err)
		}
		e.restore() // one chain still available, none in flight
		if n := e.pop(32); n != 1 || e.b.Chains[0].ID != ids[2] {
			t.Fatalf("round %d: after restore popped %d chains (id %d), want id %d", round, n, e.b.Chains[0].ID, ids[2])
		}
		if err := e.r.Push([]virtq.Used{{ID: ids[2], Descs: 1}}); err != nil {
			t.Fatal(err)
		}
		got, err := e.d.Reap(nil)
		if err != nil || len(got) != 3 || got[0].ID != ids[1] || got[1].ID != ids[0] || got[2].ID != ids[2] {
			t.Fatalf("round %d: reaped %v, %v", round, got, err)
		}
	}
}
