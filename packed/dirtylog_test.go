package packed_test

import (
	"fmt"
	"testing"

	"github.com/xvswitch/xvswitch/packed"
	"github.com/xvswitch/xvswitch/virtq"
	"github.com/xvswitch/xvswitch/virtq/drivertest"
)

// TestDirtyLogMarksEveryRingWrite: with a dirty log on the ring's memory,
// every page the ring's writes changed (used descriptors, the slots a
// chain or an IN_ORDER run covers, the device event area) is marked. The
// descriptor ring spans two pages and the event areas a third, so that
// each kind of write is checked on a page of its own: an unmarked one
// fails here wherever the write paths move.
func TestDirtyLogMarksEveryRingWrite(t *testing.T) {
	for _, inOrder := range []bool{false, true} {
		t.Run(fmt.Sprintf("in_order=%v", inOrder), func(t *testing.T) {
			m, err := drivertest.NewMem(1<<20, 1<<20)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(m.Close)
			const size = 512 // 8 KiB of descriptors: two pages
			d := drivertest.NewPackedDriver(m, 0, size)
			d.InOrder = inOrder
			feat := uint64(1)<<virtq.FeatureVersion1 | 1<<virtq.FeatureRingPacked | 1<<virtq.FeatureEventIdx
			if inOrder {
				feat |= 1 << virtq.FeatureInOrder
			}
			log := drivertest.NewLog(m)
			cfg := d.Config(feat)
			cfg.Mem = log.Logged(m)
			r, err := packed.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			buf := m.Alloc(1, 4096, 16)
			seen := map[uint64]bool{}
			for round := 0; round < 60; round++ {
				for k := 0; k < 1+round%9; k++ {
					bufs := make([]drivertest.PackedBuf, 1+k%3) // chains of 1-3 slots
					for j := range bufs {
						bufs[j] = drivertest.PackedBuf{Addr: buf, Len: 100, Write: true}
					}
					if _, err := d.Add(bufs); err != nil {
						t.Fatal(err)
					}
				}
				changed, err := log.DeviceRound(m, r, round%2 == 0)
				if err != nil {
					t.Fatalf("round %d: %v", round, err)
				}
				for _, gpa := range changed {
					seen[gpa] = true
				}
				if _, err := d.Reap(nil); err != nil {
					t.Fatal(err)
				}
			}
			for what, gpa := range map[string]uint64{
				"descriptors, first page": d.DescAddr, "descriptors, second page": d.DescAddr + 4096,
				"device event area": d.DeviceAddr &^ 4095,
			} {
				if !seen[gpa] {
					t.Errorf("%s (page %#x): never written, the check saw nothing there", what, gpa)
				}
			}
		})
	}
}
