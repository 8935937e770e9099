package split_test

import (
	"errors"
	"testing"

	"github.com/xvswitch/xvswitch/guestmem"
	"github.com/xvswitch/xvswitch/split"
	"github.com/xvswitch/xvswitch/virtq"
	"github.com/xvswitch/xvswitch/virtq/drivertest"
)

// TestNewValidates: New refuses every configuration it cannot serve safely,
// with ErrBadConfig (wrapping guestmem's reason where there is one).
func TestNewValidates(t *testing.T) {
	m := newMem(t, 1<<20, 1<<20)
	d := drivertest.NewSplitDriver(m, 0, 8)
	end := m.Regions[0].GuestAddr + m.Regions[0].Size
	cases := []struct {
		name   string
		edit   func(c *virtq.Config)
		reason error // besides ErrBadConfig, or nil
	}{
		{"size 0", func(c *virtq.Config) { c.Size = 0 }, nil},
		{"size 3", func(c *virtq.Config) { c.Size = 3 }, nil},
		{"size 12", func(c *virtq.Config) { c.Size = 12 }, nil},
		{"size 65535", func(c *virtq.Config) { c.Size = 65535 }, nil},
		{"no memory", func(c *virtq.Config) { c.Mem = nil }, nil},
		{"base over 16 bits", func(c *virtq.Config) { c.Base = 0x10000 }, nil},
		{"descriptor table misaligned", func(c *virtq.Config) { c.Desc += 8 }, guestmem.ErrMisaligned},
		{"descriptor table outside memory", func(c *virtq.Config) { c.Desc = m.User(end) }, guestmem.ErrOutOfBounds},
		{"descriptor table runs off its region", func(c *virtq.Config) { c.Desc = m.User(end - 64) }, guestmem.ErrOutOfBounds},
		{"guest address instead of front-end address", func(c *virtq.Config) { c.Desc = d.DescAddr }, guestmem.ErrOutOfBounds},
		{"avail ring odd", func(c *virtq.Config) { c.Driver++ }, guestmem.ErrMisaligned},
		{"avail ring 2-aligned only", func(c *virtq.Config) { c.Driver += 2 }, guestmem.ErrMisaligned},
		{"avail ring outside memory", func(c *virtq.Config) { c.Driver = 0 }, guestmem.ErrOutOfBounds},
		{"used ring 2-aligned only", func(c *virtq.Config) { c.Device += 2 }, guestmem.ErrMisaligned},
		{"used ring runs off its region", func(c *virtq.Config) { c.Device = m.User(end - 8) }, guestmem.ErrOutOfBounds},
		{"used idx more than a ring behind base", func(c *virtq.Config) { c.Base = 9 }, nil},
		{"used idx ahead of base", func(c *virtq.Config) { c.Base = 0xffff }, nil},
	}
	for _, tc := range cases {
		cfg := d.Config(featAll)
		tc.edit(&cfg)
		r, err := split.New(cfg)
		if !errors.Is(err, virtq.ErrBadConfig) || (tc.reason != nil && !errors.Is(err, tc.reason)) || r != nil {
			t.Errorf("%s: New: %v, want ErrBadConfig (%v)", tc.name, err, tc.reason)
		}
	}
	// Base up to a full ring ahead of the used ring's idx is a ring saved
	// with chains in flight.
	for _, base := range []uint32{0, 1, 8} {
		cfg := d.Config(featAll)
		cfg.Base = base
		if r, err := split.New(cfg); err != nil || r.State() != base || r.InFlight() != 0 {
			t.Errorf("base %d: New: %v", base, err)
		}
	}
}

// TestNewSizes: every power of two up to 32768 is accepted, with the used
// ring anywhere 4-aligned.
func TestNewSizes(t *testing.T) {
	m := newMem(t, 4<<20)
	for shift := 0; shift <= 15; shift++ {
		size := uint16(1) << shift
		d := drivertest.NewSplitDriverAt(m, 0, size, 0, 4)
		if _, err := split.New(d.Config(0)); err != nil {
			t.Errorf("size %d: %v", size, err)
		}
	}
}
