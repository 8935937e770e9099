package vhost_test

import (
	"testing"

	"golang.org/x/sys/unix"

	"github.com/xvswitch/xvswitch/vhost"
	"github.com/xvswitch/xvswitch/vhost/vhosttest"
	"github.com/xvswitch/xvswitch/virtq"
)

// TestMemSlotsPerQueuePair: QEMU 7.2 (Debian 12's) with two queue pairs
// sends every ADD_MEM_REG and REM_MEM_REG twice, once per pair, each copy
// with an fd of its own. The copies are acknowledged, a region is mapped
// once, and both queue pairs run over the table.
func TestMemSlotsPerQueuePair(t *testing.T) {
	d, _, _ := newDevice(t, vhost.Config{QueuePairs: 2})
	f := vhosttest.Connect(t, d)
	f.Negotiate(vhosttest.DefaultFeatures|1<<virtq.FeatureRingPacked, vhosttest.ProtocolQEMU)
	f.NewMemory(1<<20, 1<<20, 1<<20)
	base := guestMappings(t)
	for pair := 0; pair < 2; pair++ {
		for i, r := range f.Regions() {
			fd, err := unix.Dup(f.MemFDs()[i])
			if err != nil {
				t.Fatal(err)
			}
			f.MustAck(vhosttest.ReqAddMemReg, vhosttest.MemReg(r), fd)
			unix.Close(fd)
		}
	}
	if inf := d.Info(); inf.Regions != 3 {
		t.Fatalf("%d regions after each region was added twice, want 3", inf.Regions)
	}
	if got := guestMappings(t) - base; got != 3 {
		t.Fatalf("%d device mappings, want 3", got)
	}
	for q := 0; q < 4; q++ {
		f.SetupRing(q, f.NewRing(true, 64), true)
	}
	vhosttest.WaitFor(t, "ready", func() bool { return d.Info().Ready })
	f.MustAck(vhosttest.ReqRemMemReg, vhosttest.MemReg(f.Regions()[2]))
	f.MustAck(vhosttest.ReqRemMemReg, vhosttest.MemReg(f.Regions()[2]))
	if inf := d.Info(); inf.Regions != 2 || !inf.Ready {
		t.Fatalf("after REM_MEM_REG twice: %+v", inf)
	}
	if got := guestMappings(t) - base; got != 2 {
		t.Fatalf("%d device mappings after REM_MEM_REG, want 2", got)
	}
}
