package vswitch

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
)

// memoryHeld is what a leak check compares before and after a long test:
// the resident set, the Go heap in use, and the guest memory mappings
// (memfd regions the in-process front-ends created and the switch mapped).
type memoryHeld struct {
	rssKiB, heapKiB, guestMaps int
}

// heldMemory reads it after a collection, so garbage not yet returned
// does not count.
func heldMemory(t *testing.T) memoryHeld {
	t.Helper()
	m := memoryHeld{rssKiB: rssKiB(t)}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	m.heapKiB = int(ms.HeapInuse >> 10)
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	m.guestMaps = strings.Count(string(maps), "/memfd:")
	return m
}

// grownBeyond says how now exceeds m by more than limitKiB, or that its
// guest mappings did not return to m's. Under the race detector the RSS is
// not compared: the detector's own memory grows with the run (a soak grew
// it by 35.6 MiB once), and the heap and the mappings are what the switch
// itself holds.
func (m memoryHeld) grownBeyond(now memoryHeld, limitKiB int) []string {
	var why []string
	if !raceEnabled && now.rssKiB > m.rssKiB+limitKiB {
		why = append(why, fmt.Sprintf("RSS grew from %d KiB to %d KiB", m.rssKiB, now.rssKiB))
	}
	if now.heapKiB > m.heapKiB+limitKiB {
		why = append(why, fmt.Sprintf("Go heap in use grew from %d KiB to %d KiB", m.heapKiB, now.heapKiB))
	}
	if now.guestMaps != m.guestMaps {
		why = append(why, fmt.Sprintf("%d guest memory mappings after, %d before", now.guestMaps, m.guestMaps))
	}
	return why
}
