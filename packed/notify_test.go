package packed_test

import (
	"fmt"
	"math/rand"
	"testing"

	"github.com/xvswitch/xvswitch/virtq"
	"github.com/xvswitch/xvswitch/virtq/drivertest"
)

// pushN makes n single-slot chains available, pops and pushes them all,
// and reaps them; it returns what NeedNotify said afterwards.
func pushN(e *env, n int) bool {
	e.t.Helper()
	for i := 0; i < n; i++ {
		mustAdd(e, []drivertest.PackedBuf{{Addr: e.bufBase, Len: 10}})
	}
	var used []virtq.Used
	for len(used) < n {
		k := e.pop(virtq.MaxBurst)
		if k == 0 {
			e.t.Fatalf("popped %d of %d", len(used), n)
		}
		for i := 0; i < k; i++ {
			used = append(used, virtq.Used{ID: e.b.Chains[i].ID, Descs: 1})
		}
	}
	if err := e.r.Push(used); err != nil {
		e.t.Fatal(err)
	}
	got := e.r.NeedNotify()
	if _, err := e.d.Reap(nil); err != nil {
		e.t.Fatal(err)
	}
	return got
}

// TestNotifyFlags covers the enable/disable modes, with and without
// EVENT_IDX, and the rule that nothing pushed means no notification.
func TestNotifyFlags(t *testing.T) {
	cases := []struct {
		features uint64
		flags    uint16
		want     bool
	}{
		{0, drivertest.PackedEventEnable, true},
		{0, drivertest.PackedEventDisable, false},
		{0, drivertest.PackedEventDesc, true}, // desc without EVENT_IDX is invalid: notify
		{0, 3, true},                          // reserved: notify
		{fEventIdx, drivertest.PackedEventEnable, true},
		{fEventIdx, drivertest.PackedEventDisable, false},
		{fEventIdx | fInOrder, drivertest.PackedEventEnable, true},
		{fEventIdx | fInOrder, drivertest.PackedEventDisable, false},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("features%#x/flags%d", tc.features, tc.flags), func(t *testing.T) {
			e := newEnv(t, 4, tc.features, 1<<20)
			e.d.SetDriverEvent(tc.flags, 0)
			for round := 0; round < 10; round++ {
				if got := pushN(e, 1+round%4); got != tc.want {
					t.Fatalf("round %d: NeedNotify %t, want %t", round, got, tc.want)
				}
				if e.r.NeedNotify() {
					t.Fatalf("round %d: NeedNotify true with nothing pushed since", round)
				}
			}
		})
	}
}

// TestNotifyDesc drives EVENT_IDX's descriptor mode across many laps: the
// driver sets off_wrap to a random slot behind, among or ahead of the slots
// each burst uses, and the device must notify exactly when one of the
// slots it used since the last NeedNotify is that one. The reference walks
// the used slots one by one.
func TestNotifyDesc(t *testing.T) {
	for _, size := range []uint16{1, 2, 3, 8, 255, 256} {
		for _, inOrder := range []bool{false, true} {
			t.Run(fmt.Sprintf("size%d/inorder%t", size, inOrder), func(t *testing.T) {
				f := fEventIdx
				if inOrder {
					f |= fInOrder
				}
				runNotifyDesc(t, size, f, int64(size))
			})
		}
	}
}

func runNotifyDesc(t *testing.T, size uint16, features uint64, seed int64) {
	rng := rand.New(rand.NewSource(seed))
	e := newEnv(t, size, features, 1<<20)
	s := int64(size)
	// pos maps a linear used-slot count to (slot, wrap counter).
	pos := func(l int64) (uint16, bool) { return uint16(l % s), (l/s)%2 == 0 }
	var lin int64 // used slots so far
	// The first NeedNotify after New is conservative.
	e.d.SetDriverEvent(drivertest.PackedEventDesc, drivertest.PackedOffWrap(pos(lin+5*s)))
	if !pushN(e, 1) {
		t.Fatal("first NeedNotify in desc mode must notify")
	}
	lin++
	hits, misses := 0, 0
	for round := 0; round < 400; round++ {
		// A burst of up to size buffers of 1..3 slots.
		var chains []int
		total := 0
		for {
			sl := 1 + rng.Intn(3)
			if total+sl > int(size) || (len(chains) > 0 && rng.Intn(3) == 0) {
				break
			}
			chains = append(chains, sl)
			total += sl
		}
		if len(chains) == 0 {
			chains, total = []int{1}, 1
		}
		// The event slot: from 2*size-1 behind the new used index to
		// size-1 ahead of it (off_wrap is only unambiguous within that).
		newLin := lin + int64(total)
		ev := newLin - 2*s + 1 + rng.Int63n(3*s-1)
		if rng.Intn(2) == 0 {
			// Near the edges of this burst's slots, where off-by-ones live.
			ev = lin - 2 + rng.Int63n(int64(total)+4)
			ev = max(ev, newLin-2*s+1)
			ev = min(ev, newLin+s-1)
		}
		if ev < 0 {
			ev = rng.Int63n(newLin + s)
		}
		e.d.SetDriverEvent(drivertest.PackedEventDesc, drivertest.PackedOffWrap(pos(ev)))
		want := ev >= lin && ev < newLin
		for _, sl := range chains {
			bufs := make([]drivertest.PackedBuf, sl)
			for i := range bufs {
				bufs[i] = drivertest.PackedBuf{Addr: e.bufBase, Len: 8}
			}
			mustAdd(e, bufs)
		}
		n := e.pop(virtq.MaxBurst)
		if n != len(chains) {
			t.Fatalf("popped %d of %d", n, len(chains))
		}
		used := make([]virtq.Used, n)
		for i := range used {
			used[i] = virtq.Used{ID: e.b.Chains[i].ID, Descs: e.b.Chains[i].Descs}
		}
		if features&fInOrder == 0 {
			rng.Shuffle(n, func(i, j int) { used[i], used[j] = used[j], used[i] })
		}
		if err := e.r.Push(used); err != nil {
			t.Fatal(err)
		}
		if got := e.r.NeedNotify(); got != want {
			ei, ew := pos(ev)
			oi, ow := pos(lin)
			t.Fatalf("round %d: used slots %d..%d (from %d/%t), event at %d/%t: NeedNotify %t, want %t",
				round, lin, newLin-1, oi, ow, ei, ew, got, want)
		}
		if want {
			hits++
		} else {
			misses++
		}
		if _, err := e.d.Reap(nil); err != nil {
			t.Fatal(err)
		}
		lin = newLin
	}
	if hits == 0 || misses == 0 {
		t.Fatalf("reference never varied: %d notifications, %d not", hits, misses)
	}
	t.Logf("%d notifications, %d suppressed over %.1f laps", hits, misses, float64(lin)/float64(s))
}

// TestNotifyAfterRestore: a restored ring does not know what its
// predecessor signalled, so its first decision in desc mode notifies.
func TestNotifyAfterRestore(t *testing.T) {
	e := newEnv(t, 16, fEventIdx, 1<<20)
	e.d.SetDriverEvent(drivertest.PackedEventDesc, drivertest.PackedOffWrap(0, false)) // far ahead
	pushN(e, 3)
	if pushN(e, 3) {
		t.Fatal("event far ahead notified")
	}
	e.restore()
	if !pushN(e, 3) {
		t.Fatal("first decision after restore did not notify")
	}
	if pushN(e, 3) {
		t.Fatal("event far ahead notified after restore")
	}
}

// TestKicks checks the device event suppression area and that a Pop after
// EnableKicks finds what the driver made available while kicks were off.
func TestKicks(t *testing.T) {
	e := newEnv(t, 8, fEventIdx, 1<<20)
	e.r.DisableKicks()
	if f, _ := e.d.DeviceEvent(); f != drivertest.PackedEventDisable {
		t.Fatalf("after DisableKicks the device area says %d", f)
	}
	mustAdd(e, []drivertest.PackedBuf{{Addr: e.bufBase, Len: 10}})
	e.r.EnableKicks()
	if f, _ := e.d.DeviceEvent(); f != drivertest.PackedEventEnable {
		t.Fatalf("after EnableKicks the device area says %d", f)
	}
	if n := e.pop(virtq.MaxBurst); n != 1 {
		t.Fatalf("Pop after EnableKicks found %d chains, want the 1 made available while kicks were off", n)
	}
	e.r.DisableKicks()
	e.r.DisableKicks()
	if f, _ := e.d.DeviceEvent(); f != drivertest.PackedEventDisable {
		t.Fatalf("after DisableKicks the device area says %d", f)
	}
}
