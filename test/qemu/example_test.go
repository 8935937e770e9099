package qemu

import (
	"testing"
	"time"
)

// A guest with two vhost-user NICs on some back-end (xvswitch, testpmd),
// eth1 in its own namespace, pinging and streaming across the back-end.
// (Compiled, not run: it needs a back-end on the sockets.)
func ExampleStartGuest() {
	var t *testing.T // the test's t
	cfg := GuestConfig{
		NICs: []GuestNIC{
			{Socket: "/run/xvs/vm0.sock", Packed: true, Addr: "10.1.0.1/24"},
			{Socket: "/run/xvs/vm1.sock", Packed: true, Addr: "10.1.0.2/24", Netns: "far"},
		},
		Commands: []GuestCommand{
			GuestPing("ping", "", "10.1.0.2", 5, 56),
			GuestTCP("tcp", "far", "10.1.0.2", "", 5001, 1<<20),
		},
		Timeout: 60 * time.Second,
	}
	run := StartGuest(t, cfg).Wait()
	run.RequireOK(t, cfg) // every ping answered, every byte intact
	if !run.HasFeature(0, VirtioFRingPacked) {
		t.Error("eth0 did not negotiate the packed ring")
	}
	t.Logf("ping: %d/%d, tcp sha256 %s", run.Result("ping").Received, run.Result("ping").Transmitted,
		run.Result("tcp").SHA256)
}
