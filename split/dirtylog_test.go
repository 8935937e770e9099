package split_test

import (
	"fmt"
	"testing"

	"github.com/xvswitch/xvswitch/split"
	"github.com/xvswitch/xvswitch/virtq"
	"github.com/xvswitch/xvswitch/virtq/drivertest"
)

// TestDirtyLogMarksEveryRingWrite: with a dirty log on the ring's memory,
// every page the ring's writes changed (used elements, the used flags and
// index, avail_event) is marked. The used ring starts on a page, so its
// index, the elements the test's indexes reach (from 600 on, wrapping at
// 1024) and avail_event lie on pages of their own: each kind of write is
// checked alone, and an unmarked one fails here wherever the write paths
// move.
func TestDirtyLogMarksEveryRingWrite(t *testing.T) {
	for _, eventIdx := range []bool{false, true} {
		t.Run(fmt.Sprintf("event_idx=%v", eventIdx), func(t *testing.T) {
			m := newMem(t, 1<<20, 1<<20)
			const size = 1024
			d := drivertest.NewSplitDriverAt(m, 0, size, 600, 4096)
			feat := uint64(1) << virtq.FeatureVersion1
			if eventIdx {
				feat |= featEventIdx
			}
			log := drivertest.NewLog(m)
			cfg := d.Config(feat)
			cfg.Mem = log.Logged(m)
			r, err := split.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			buf := m.Alloc(1, 4096, 16)
			seen := map[uint64]bool{}
			for round := 0; round < 100; round++ { // ~700 chains: the indexes pass 1024
				for k := 0; k < 1+round%13; k++ {
					if _, err := d.AddChain([]drivertest.SplitBuf{{Addr: buf, Len: 100, Write: true}}, nil); err != nil {
						t.Fatal(err)
					}
				}
				d.Publish()
				changed, err := log.DeviceRound(m, r, round%2 == 0)
				if err != nil {
					t.Fatalf("round %d: %v", round, err)
				}
				for _, gpa := range changed {
					seen[gpa] = true
				}
				for {
					_, ok, err := d.Reap()
					if err != nil {
						t.Fatal(err)
					}
					if !ok {
						break
					}
				}
			}
			pages := map[string]uint64{
				"used flags and index": d.UsedAddr, "used elements 600..1023": d.UsedAddr + 4096,
			}
			if eventIdx {
				pages["avail_event"] = d.UsedAddr + 8192
			}
			if d.UsedIdx() < size {
				t.Fatalf("used index %d: never wrapped around the ring", d.UsedIdx())
			}
			for what, gpa := range pages {
				if !seen[gpa] {
					t.Errorf("%s (page %#x): never written, the check saw nothing there", what, gpa)
				}
			}
		})
	}
}
