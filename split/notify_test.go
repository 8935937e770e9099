package split_test

import (
	"fmt"
	"testing"

	"github.com/xvswitch/xvswitch/virtq/drivertest"
)

// crosses is the event-index rule spelled out by enumeration rather than by
// the spec's formula: whether event is one of old, old+1, ..., new-1.
func crosses(event, new, old uint16) bool {
	for x := old; x != new; x++ {
		if x == event {
			return true
		}
	}
	return false
}

// TestNeedNotifyEventIdx: with EVENT_IDX the device interrupts exactly when
// the used index it published since the last decision passes used_event,
// across the 16-bit wrap, with random burst sizes and used_event values.
func TestNeedNotifyEventIdx(t *testing.T) {
	for _, size := range []int{1, 16, 256} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			m := newMem(t, 4<<20, 4<<20)
			d := drivertest.NewSplitDriverAt(m, 0, uint16(size), uint16(65536-3*size-20), 4)
			h := newHarness(t, m, d, featAll, 64, int64(size))
			first := true
			notified := 0
			last := h.d.UsedIdx()
			for round := 0; round < 4000; round++ {
				for i := h.rng.Intn(size + 1); i > 0 && h.add(oneBuf(h)); i-- {
				}
				h.d.Publish()
				h.pop(1 + h.rng.Intn(32))
				h.complete(h.rng.Intn(len(h.popped)+1), true)
				now := h.d.UsedIdx()
				event := now + uint16(h.rng.Intn(2*size+8)-size-4)
				h.d.SetUsedEvent(event)
				got := h.r.NeedNotify()
				want := now != last && (first || crosses(event, now, last))
				if got != want {
					t.Fatalf("round %d: used %d -> %d, used_event %d: NeedNotify %v, want %v", round, last, now, event, got, want)
				}
				if now != last {
					first = false
				}
				if got {
					notified++
				}
				last = now
				h.reap()
			}
			h.drain()
			if notified == 0 || notified == 4000 {
				t.Fatalf("%d notifications in 4000 rounds: the test did not exercise both outcomes", notified)
			}
		})
	}
}

// TestNeedNotifyLinuxPattern: a driver that re-arms as Linux does
// (used_event = the next entry it will reap, after reaping everything) gets
// one interrupt per re-arm, however many entries follow before it re-arms.
func TestNeedNotifyLinuxPattern(t *testing.T) {
	m := newMem(t, 4<<20, 4<<20)
	d := drivertest.NewSplitDriverAt(m, 0, 64, 65536-100, 4)
	h := newHarness(t, m, d, featAll, 64, 1)
	h.add(oneBuf(h))
	h.d.Publish()
	h.pop(32)
	h.complete(1, false)
	h.r.NeedNotify() // the first decision after New always notifies
	h.reap()
	for round := 0; round < 300; round++ {
		h.d.SetUsedEvent(h.d.UsedIdx()) // re-armed, everything reaped
		interrupts := 0
		for burst := 0; burst < 5; burst++ {
			for i := 0; i < 3; i++ {
				h.add(oneBuf(h))
			}
			h.d.Publish()
			h.pop(32)
			h.complete(len(h.popped), false)
			if h.r.NeedNotify() {
				interrupts++
			}
		}
		if interrupts != 1 {
			t.Fatalf("round %d: %d interrupts between re-arms, want 1", round, interrupts)
		}
		h.reap()
	}
	h.drain()
}

// TestNeedNotifyNoInterrupt: without EVENT_IDX the device interrupts after
// publishing new used entries unless the driver set NO_INTERRUPT, and never
// when it published nothing new.
func TestNeedNotifyNoInterrupt(t *testing.T) {
	m := newMem(t, 4<<20, 4<<20)
	d := drivertest.NewSplitDriverAt(m, 0, 8, 65536-10, 4)
	h := newHarness(t, m, d, 0, 64, 1)
	for round := 0; round < 100; round++ {
		mask := h.rng.Intn(2) == 0
		h.d.SetNoInterrupt(mask)
		pushed := h.rng.Intn(3)
		for i := 0; i < pushed; i++ {
			h.add(oneBuf(h))
		}
		h.d.Publish()
		h.pop(32)
		h.complete(len(h.popped), false)
		if got, want := h.r.NeedNotify(), pushed > 0 && !mask; got != want {
			t.Fatalf("round %d: pushed %d, NO_INTERRUPT %v: NeedNotify %v", round, pushed, mask, got)
		}
		if h.r.NeedNotify() {
			t.Fatalf("round %d: second NeedNotify with nothing new said true", round)
		}
		h.reap()
	}
}

// TestKicks: EnableKicks and DisableKicks, with and without EVENT_IDX, seen
// from the driver's side: whether virtqueue_kick_prepare would kick.
func TestKicks(t *testing.T) {
	for _, eventIdx := range []bool{false, true} {
		t.Run(fmt.Sprint("eventIdx=", eventIdx), func(t *testing.T) {
			features := uint64(featIndirect)
			if eventIdx {
				features |= featEventIdx
			}
			m := newMem(t, 4<<20, 4<<20)
			d := drivertest.NewSplitDriverAt(m, 0, 16, 65536-40, 4)
			h := newHarness(t, m, d, features, 64, 1)
			for round := 0; round < 40; round++ { // crosses the wrap
				h.r.EnableKicks()
				if eventIdx && h.d.AvailEvent() != uint16(h.r.State()) {
					t.Fatalf("avail_event %d, want next avail %d", h.d.AvailEvent(), h.r.State())
				}
				if !eventIdx && h.d.UsedFlags()&drivertest.SplitUsedFNoNotify != 0 {
					t.Fatal("NO_NOTIFY still set after EnableKicks")
				}
				h.add(oneBuf(h))
				h.d.Publish()
				if !h.d.NeedKick(eventIdx) {
					t.Fatalf("round %d: no kick after EnableKicks", round)
				}
				// With EVENT_IDX one kick per enable: the next buffer does
				// not kick again until the device re-enables.
				h.add(oneBuf(h))
				h.d.Publish()
				if got := h.d.NeedKick(eventIdx); got != !eventIdx {
					t.Fatalf("round %d: second kick %v", round, got)
				}
				h.r.DisableKicks()
				usedBefore := h.d.UsedIdx()
				for i := 0; i < 3; i++ {
					h.add(oneBuf(h))
					h.d.Publish()
					if h.d.NeedKick(eventIdx) {
						t.Fatalf("round %d: kick while kicks are disabled", round)
					}
				}
				if h.d.UsedIdx() != usedBefore {
					t.Fatal("DisableKicks moved the used index")
				}
				h.drain()
				if !eventIdx && h.d.UsedFlags()&drivertest.SplitUsedFNoNotify == 0 {
					t.Fatal("Push cleared NO_NOTIFY")
				}
			}
		})
	}
}
