package vswitch

import (
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"github.com/xvswitch/xvswitch/ctl"
)

// TestClearStats: clear-stats zeroes every queue's counters, bursts,
// flood copies and refused learning included, and counting goes on from zero.
func TestClearStats(t *testing.T) {
	s := startTestSwitch(t, Config{Workers: 1})
	a, b, c := newFakePort(), newFakePort(), newFakePort()
	for i, f := range []*fakePort{a, b, c} {
		if _, err := s.addSecuredPort(string(rune('a'+i)), f, security{maxMACs: 1}); err != nil {
			t.Fatal(err)
		}
	}
	// Two sources on a port that may learn one: one refused; a runt is a drop.
	a.put(ethFrame(bcast, 0x0200_0000_0001, "x"), ethFrame(bcast, 0x0200_0000_0002, "y"), []byte{1})
	waitFor(t, "flood", func() bool { return len(b.frames()) == 2 && len(c.frames()) == 2 })
	balance(t, s)
	st := s.Stats()
	if st[0].RxPackets != 3 || st[0].RxBursts == 0 || st[1].TxBursts == 0 || st[0].FloodCopies != 2 || st[0].LearnRefused != 1 || st[0].Drops["malformed"] != 1 {
		t.Fatalf("before clear: %+v", st[0])
	}
	resp := s.Handle(ctl.Request{Op: ctl.OpClearStats})
	if resp.Error != "" {
		t.Fatal(resp.Error)
	}
	for _, p := range s.Stats() {
		if p.RxPackets|p.TxPackets|p.RxBytes|p.TxBytes|p.RxBursts|p.TxBursts|p.FloodCopies|p.LearnRefused != 0 || len(p.Drops) != 0 {
			t.Errorf("after clear: %+v", p)
		}
	}
	// The FDB itself is untouched: b answers a's first MAC as unicast.
	b.put(ethFrame(0x0200_0000_0001, 0x0200_0000_000b, "z"))
	waitFor(t, "unicast", func() bool { return len(a.frames()) == 1 })
	balance(t, s)
	if st := s.Stats(); st[1].RxPackets != 1 || st[0].TxPackets != 1 || st[2].TxPackets != 0 {
		t.Fatalf("after clear and one frame: %+v", st)
	}
}

// TestQueueStatsClearEvery: clear zeroes every counter of a queue, also
// one added to QueueStats later and forgotten in clear's list.
func TestQueueStatsClearEvery(t *testing.T) {
	var q QueueStats
	v := reflect.ValueOf(&q).Elem()
	var set func(v reflect.Value)
	set = func(v reflect.Value) {
		switch c := v.Addr().Interface().(type) {
		case *atomic.Uint64:
			c.Store(1)
			return
		}
		switch v.Kind() {
		case reflect.Struct:
			for i := range v.NumField() {
				set(v.Field(i))
			}
		case reflect.Array:
			for i := range v.Len() {
				set(v.Index(i))
			}
		}
	}
	set(v)
	if q.StreamedFrames.Load() != 1 || q.Drops[0].Load() != 1 {
		t.Fatal("the counters were not all set")
	}
	q.clear()
	if got := q.snapshot(0); !reflect.DeepEqual(got, ctl.QueueCounters{Drops: map[string]uint64{}}) {
		t.Errorf("after clear: %+v", got)
	}
}

// TestShowWorkers: each worker lists the queues it polls, and its idle
// time grows while it sleeps, from its own timestamps.
func TestShowWorkers(t *testing.T) {
	s := startTestSwitch(t, Config{Workers: 2, IdleAfter: time.Millisecond})
	for _, name := range []string{"a", "b", "c"} {
		if _, err := s.addPort(name, newFakePort(), 0); err != nil {
			t.Fatal(err)
		}
	}
	var ws []ctl.WorkerInfo
	waitFor(t, "workers to sleep", func() bool {
		ws = s.Handle(ctl.Request{Op: ctl.OpShowWorkers}).Workers
		return len(ws) == 2 && ws[0].Sleeps > 0 && ws[1].Sleeps > 0 && ws[0].IdleNs > 0 && ws[1].IdleNs > 0
	})
	want := [][]string{{"a/0", "c/0"}, {"b/0"}}
	for i, w := range ws {
		if w.ID != i || w.CPU != -1 || len(w.Queues) != len(want[i]) {
			t.Fatalf("worker %d: %+v", i, w)
		}
		for j := range want[i] {
			if w.Queues[j] != want[i][j] {
				t.Fatalf("worker %d polls %v, want %v", i, w.Queues, want[i])
			}
		}
		if w.IdleNs > w.RunningNs || w.BusyPercent < 0 || w.BusyPercent > 100 {
			t.Fatalf("worker %d: idle %d of %d ns, busy %.1f%%", i, w.IdleNs, w.RunningNs, w.BusyPercent)
		}
	}
	// Idle, the workers sleep: their idle time keeps growing.
	time.Sleep(50 * time.Millisecond)
	later := s.Workers()
	if later[0].IdleNs <= ws[0].IdleNs || later[0].RunningNs <= ws[0].RunningNs {
		t.Fatalf("idle worker: idle %d -> %d ns, running %d -> %d ns", ws[0].IdleNs, later[0].IdleNs, ws[0].RunningNs, later[0].RunningNs)
	}
}
