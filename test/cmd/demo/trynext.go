package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// tryNext prints what to do with the topology while it stays up: each
// command with the run's real names and paths, ready to paste into
// another terminal (as root).
func tryNext(s *session, x *xvswitch, o *outcome) {
	dir, _ := os.Getwd()
	cli := func(args ...string) string { return shellLine(x.bin, x.cliArgs(args...)...) }
	var where string
	if !filepath.IsAbs(x.bin) {
		where = " (from " + dir + ")"
	}
	cmds := [][2]string{
		{"ip netns exec " + o.Namespace + " ping " + guestAddr, "the guest, through XDP, AF_XDP, xvswitch and vhost-user"},
		{cli("show", "stats"), "the counters move with the pings"},
		{cli("show", "ports"), "ports, their state, XDP mode, ring kind"},
		{cli("show", "workers"), "which worker polls which queue, how busy"},
		{cli("show", "fdb"), "the MACs the bridge learned or was given"},
		{cli("capture", "vm1", "-c", "5"), "the guest's port's frames (ping meanwhile)"},
		{cli("capture", "nic0", "-w", "-", "-c", "5") + " | tcpdump -n -r -", "the NIC port's, as pcap"},
		{"bpftool map dump pinned " + o.PinDir + "/counters", "the XDP program's verdicts"},
		{"bpftool map dump pinned " + o.PinDir + "/macs", "the MACs it steers to the switch"},
		{"ip netns exec " + o.Namespace + " ping " + hostAddr, "the host's own address on the NIC: its kernel answers"},
	}
	s.step("the topology stays up until Ctrl-C; meanwhile, as root in another terminal%s:", where)
	w := 0
	for _, c := range cmds {
		w = max(w, len(c[0]))
	}
	for _, c := range cmds {
		fmt.Fprintf(s.out, "    %s%s  # %s\n", c[0], strings.Repeat(" ", w-len(c[0])), c[1])
	}
	fmt.Fprintf(s.out, "    (xvswitch's log follows here; Ctrl-C stops xvswitch and QEMU and removes the namespace, the veth pair and %s)\n", o.RunDir)
}
