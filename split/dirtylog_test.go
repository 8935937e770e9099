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
			var b virtq.Burst
			var used []virtq.Used
			for round := 0; round < 100; round++ { // ~700 chains: the indexes pass 1024
				for k := 0; k < 1+round%13; k++ {
					if _, err := d.AddChain([]drivertest.SplitBuf{{Addr: buf, Len: 100, Write: true}}, nil); err != nil {
						t.Fatal(err)
					}
				}
				d.Publish()
				log.Clear()
				snap := m.Snapshot()
				n, err := r.Pop(&b, virtq.MaxBurst)
				if err != nil {
					t.Fatal(err)
				}
				used = used[:0]
				for i := 0; i < n; i++ {
					c := &b.Chains[i]
					used = append(used, virtq.Used{ID: c.ID, Descs: c.Descs, Len: c.WriteLen})
				}
				if err := r.Push(used); err != nil {
					t.Fatal(err)
				}
				if round%2 == 0 {
					r.EnableKicks()
				} else {
					r.DisableKicks()
				}
				for _, gpa := range m.ChangedPages(snap) {
					seen[gpa] = true
					if !log.Dirty(gpa) {
						t.Fatalf("round %d: page %#x written by the ring, not in the dirty log", round, gpa)
					}
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
