package main

import (
	"os"
	"strings"
	"testing"
)

// readmeDemo is the README's demo section.
func readmeDemo(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(string(b), "\n## The demo\n")
	if !ok {
		t.Fatal("README.md has no section \"## The demo\"")
	}
	sec, _, _ = strings.Cut(sec, "\n## ")
	return sec
}

// TestREADMEDemo: the README's demo section quotes xvswitch's command line
// as the demo runs it, both the line with placeholders and the one in the
// run it shows, and the demo's narration steps.
func TestREADMEDemo(t *testing.T) {
	sec := readmeDemo(t)
	lines := 0
	for _, l := range strings.Split(sec, "\n") {
		l = strings.TrimPrefix(l, "$ ")
		if !strings.HasPrefix(l, "bin/xvswitch run ") {
			continue
		}
		lines++
		f := strings.Fields(l)
		var nic, sock string
		for i := 0; i+1 < len(f); i++ {
			switch f[i] {
			case "--nic":
				nic, _, _ = strings.Cut(f[i+1], ",")
			case "--vhost":
				sock, _, _ = strings.Cut(f[i+1], ",")
			}
		}
		if want := shellLine("bin/xvswitch", switchArgs(nic, sock, "")...); l != want {
			t.Errorf("README.md's demo runs\n\t%s\nthe demo runs\n\t%s", l, want)
		}
	}
	if lines < 2 {
		t.Errorf("README.md's demo section quotes xvswitch's command line %d times, want 2 (the command, the run)", lines)
	}
	for _, s := range []string{"==> xvswitch demo:", "$ qemu-system-x86_64 ", ",server=on,wait=off", "$ bin/xvswitch show ports",
		"$ bin/xvswitch show stats", "$ bin/xvswitch show fdb", ": match", "==> the topology stays up until Ctrl-C",
		"bpftool map dump pinned /sys/fs/bpf/xvswitch/", "bin/xvswitch capture vm1 -c 5", "nothing left behind", "==> demo done"} {
		if !strings.Contains(sec, s) {
			t.Errorf("README.md's demo run lacks %q", s)
		}
	}
}

// TestREADMEClientFirst: every `xvswitch run` example in the README that
// has vhost-user ports shows client mode first, the mode docs/vms.md
// recommends.
func TestREADMEClientFirst(t *testing.T) {
	b, err := os.ReadFile("../../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, l := range strings.Split(string(b), "\n") {
		if !strings.Contains(l, "xvswitch run ") && !strings.Contains(l, "xvswitch add-port ") {
			continue
		}
		f := strings.Fields(l)
		for i := 0; i+1 < len(f); i++ {
			if f[i] == "--vhost" {
				seen++
				if !strings.Contains(f[i+1], ",client") {
					t.Errorf("README.md: the first vhost-user port is not in client mode:\n\t%s", l)
				}
				break
			}
		}
	}
	if seen == 0 {
		t.Error("README.md has no xvswitch run example with --vhost")
	}
}
