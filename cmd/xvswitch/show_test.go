package main

import (
	"strings"
	"testing"

	"github.com/xvswitch/xvswitch/ctl"
)

// TestShowStatsLearnRefused: a port's refused learning is printed under
// it, apart from its drops (the frames were forwarded), and only when
// there was some.
func TestShowStatsLearnRefused(t *testing.T) {
	resp := ctl.Response{Stats: []ctl.PortCounters{
		{Name: "evil", RxPackets: 100, Drops: map[string]uint64{"spoofed_source": 3}, LearnRefused: 36},
		{Name: "quiet"},
	}}
	var b strings.Builder
	if err := printShow(&b, "stats", resp, false); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if !strings.Contains(out, "spoofed_source=3") || !strings.Contains(out, "learn_refused=36") {
		t.Errorf("missing counters in\n%s", out)
	}
	if n := strings.Count(out, "learn_refused"); n != 1 {
		t.Errorf("learn_refused printed %d times, want once (evil only):\n%s", n, out)
	}
}
