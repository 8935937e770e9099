package main

import (
	"strings"
	"testing"
)

// TestHelpExamplesClientFirst: where a help text's example has vhost-user
// ports, the first is in client mode (xvswitch connects to QEMU's socket),
// the mode docs/vms.md recommends: a user copies the first example.
func TestHelpExamplesClientFirst(t *testing.T) {
	seen := 0
	for _, c := range commands {
		_, out, _ := runCLI("help", c.name)
		_, example, ok := strings.Cut(out, "\nexample:\n")
		if !ok {
			continue
		}
		example, _, _ = strings.Cut(example, "\n\n")
		f := strings.Fields(example)
		for i := 0; i+1 < len(f); i++ {
			if f[i] == "--vhost" {
				seen++
				if !strings.Contains(f[i+1], ",client") {
					t.Errorf("xvswitch help %s: the example's first vhost-user port is not in client mode: --vhost %s", c.name, f[i+1])
				}
				break
			}
		}
	}
	if seen == 0 {
		t.Errorf("no help text has an example with --vhost")
	}
}
