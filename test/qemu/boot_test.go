package qemu

import (
	"strings"
	"testing"
)

// TestCommandLineMemory: guest RAM is a shared memfd, on 2 MiB huge pages
// when asked, and CommandLine is the line StartGuest builds.
func TestCommandLineMemory(t *testing.T) {
	nic := []GuestNIC{{Socket: "/s", MAC: "52:54:00:00:00:01"}}
	for _, huge := range []bool{false, true} {
		cfg := GuestConfig{NICs: nic, HugePages: huge}
		got := strings.Join(CommandLine(cfg, "k", "i", "c", "r"), " ")
		want := strings.Join(qemuArgs(&cfg, []string{"52:54:00:00:00:01"}, "k", "i", "c", "r"), " ")
		mem := "memory-backend-memfd,id=mem,size=256M,share=on"
		if huge {
			mem += ",hugetlb=on,hugetlbsize=2M"
		}
		if got != want || !strings.Contains(got, "-object "+mem+" -numa node,memdev=mem") {
			t.Errorf("huge=%v: %s", huge, got)
		}
	}
	if c := KernelCmdline(GuestConfig{KernelArgs: []string{"x=1"}}); !strings.Contains(c, "clocksource=hpet") || !strings.HasSuffix(c, " x=1") {
		t.Errorf("kernel command line %q", c)
	}
}

// TestGuestOutage: the outage command tells the host when to start, and
// needs a failed ping and then the asked number of answered ones.
func TestGuestOutage(t *testing.T) {
	c := GuestOutage("restart", "far", "10.0.0.2", 3)
	if c.Kind != CmdShell || c.Netns != "far" || c.Timeout == 0 ||
		!strings.HasPrefix(c.Script, `echo "XVS-READY name=restart `) ||
		!strings.Contains(c.Script, "ping -c 1 -W 1 '10.0.0.2'") ||
		!strings.HasSuffix(c.Script, "[ $fails -gt 0 ] && [ $after -ge 3 ]") {
		t.Errorf("%+v", c)
	}
}
