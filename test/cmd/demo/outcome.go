package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"

	"github.com/xvswitch/xvswitch/ctl"
)

// outcome is what a demo run did and saw, written as JSON with -outcome
// FILE: the demo's test judges a run by it, and by what it finds left on
// the host afterwards, at the names recorded here.
type outcome struct {
	Namespace string `json:"namespace"`
	NIC       string `json:"nic"`        // the veth's outer end
	NICPeer   string `json:"nic_peer"`   // its inner end, in Namespace
	RunDir    string `json:"run_dir"`    // QEMU's socket, the guest's files
	Socket    string `json:"socket"`     // the vhost-user socket (QEMU's)
	Ctl       string `json:"ctl"`        // xvswitch's control socket
	PinDir    string `json:"pin_dir"`    // the XDP program's pins
	SwitchCmd string `json:"switch_cmd"` // xvswitch's command line
	PIDs      []int  `json:"pids"`       // xvswitch's and QEMU's

	Interactive bool `json:"interactive"`
	// Held: the demo kept the topology up for the user, until a signal.
	Held bool `json:"held"`
	// GuestUp: the guest booted and listened; Ring is the virtqueue kind
	// its NIC negotiated.
	GuestUp bool   `json:"guest_up"`
	Ring    string `json:"ring"`
	// Ping is the namespace pinging the guest; HostPing the namespace
	// pinging the host's own address on the NIC.
	Ping     pingResult `json:"ping"`
	HostPing pingResult `json:"host_ping"`
	// ToGuest and FromGuest are the TCP streams, namespace -> guest and
	// guest -> namespace.
	ToGuest   transfer `json:"to_guest"`
	FromGuest transfer `json:"from_guest"`
	// Stats is `show stats --json` after the traffic, Ledger its sums.
	Stats  []ctl.PortCounters `json:"stats"`
	Ledger ledger             `json:"ledger"`
	// GuestCompleted: the guest ran its whole script and powered off.
	GuestCompleted bool `json:"guest_completed"`
	// Leftovers are what teardown found still there: nothing, if it
	// cleaned up.
	Leftovers []string `json:"leftovers"`
	Err       string   `json:"error,omitempty"`
}

func (o *outcome) write(path string) error {
	b, err := json.MarshalIndent(o, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// made names what the run made, for the teardown to say what it removes.
func (o *outcome) made(runDir string) []string {
	var m []string
	if o.SwitchCmd != "" {
		m = append(m, "xvswitch (SIGTERM)")
	}
	if len(o.PIDs) > 0 { // QEMU's, the first the demo starts
		m = append(m, "QEMU")
	}
	if o.Namespace != "" {
		m = append(m, "namespace "+o.Namespace, "veth pair "+o.NIC+"/"+o.NICPeer)
	}
	return append(m, runDir)
}

// leftovers lists what of the demo's topology is still on the host.
func (o *outcome) leftovers() []string {
	var left []string
	exists := func(p string) bool { _, err := os.Lstat(p); return err == nil }
	for _, p := range []string{o.PinDir, o.Socket, o.RunDir} {
		if p != "" && exists(p) {
			left = append(left, p)
		}
	}
	// The control socket is xvswitch's to remove, and only if the demo
	// started one (a refused start leaves the other daemon's alone).
	if o.Ctl != "" && o.SwitchCmd != "" && exists(o.Ctl) {
		left = append(left, o.Ctl)
	}
	if o.NIC != "" && exec.Command("ip", "link", "show", "dev", o.NIC).Run() == nil {
		left = append(left, "interface "+o.NIC)
	}
	if o.Namespace != "" {
		out, _ := exec.Command("ip", "netns", "list").Output()
		for _, l := range strings.Split(string(out), "\n") {
			if f := strings.Fields(l); len(f) > 0 && f[0] == o.Namespace {
				left = append(left, "namespace "+o.Namespace)
			}
		}
	}
	for _, pid := range o.PIDs {
		// The demo reaped its own children: a process still there under
		// a PID it had is a stray (or, very rarely, a reused PID).
		if cmd, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); err == nil && len(cmd) > 0 {
			left = append(left, fmt.Sprintf("process %d (%s)", pid, strings.ReplaceAll(string(cmd), "\x00", " ")))
		}
	}
	return left
}
