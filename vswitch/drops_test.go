package vswitch

import "testing"

// TestDropReasonsNamed: every reason has a name of its own, so `show
// stats` and the metrics (a series per DropReasons entry) tell them apart.
func TestDropReasonsNamed(t *testing.T) {
	seen := map[string]bool{}
	for i, name := range DropReasons() {
		if name == "" || name == "unknown" || seen[name] {
			t.Errorf("reason %d is named %q", i, name)
		}
		seen[name] = true
	}
	if !seen["spoofed_source"] {
		t.Errorf("no spoofed_source in %v", DropReasons())
	}
}
