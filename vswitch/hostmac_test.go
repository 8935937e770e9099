package vswitch

import (
	"net"
	"testing"
	"time"
)

// TestHostMACNotHijacked: a port (a guest without mac=, here a fake one)
// sends one frame whose source is the host's own MAC on a NIC. Before,
// the FDB learned that MAC on the attacker's port, so the NIC's XDP
// program steered the host's unicast into the switch and out to the
// attacker: the host's address stopped answering on that NIC. A NIC's own
// MAC is now a static entry of its port: learning cannot move it and the
// NIC's program never steers it.
func TestHostMACNotHijacked(t *testing.T) {
	l := newNICLab(t)
	ifi, err := net.InterfaceByName(l.b.Outer)
	if err != nil {
		t.Fatal(err)
	}
	hostMAC := MACKey(ifi.HardwareAddr)
	attacker := newFakePort()
	if err := l.s.AddPort("attacker", attacker, 0); err != nil {
		t.Fatal(err)
	}
	attacker.put(ethFrame(bcast, hostMAC, "I am the host now"))
	waitFor(t, "the attacker's frame received", func() bool { return portStats(l.s, "attacker").RxPackets == 1 })
	time.Sleep(300 * time.Millisecond) // the housekeeper syncs the NICs' MAC maps
	l.s.mu.Lock()
	owner := l.s.fdb.Lookup(hostMAC)
	want := l.s.byName[l.b.Outer].idx
	l.s.mu.Unlock()
	if owner != want {
		t.Errorf("the host's MAC %s is on port %d, want the NIC's (%d)", ifi.HardwareAddr, owner, want)
	}
	macs, err := l.steering(t, l.b.Outer).MACs()
	if err != nil {
		t.Fatal(err)
	}
	if _, steered := macs[ifi.HardwareAddr.String()]; steered {
		t.Errorf("the NIC's XDP program steers the host's own MAC to the switch: %v", macs)
	}
	// B's namespace still reaches the host's address on that NIC.
	if out, err := l.b.NS.Exec("ping", "-c", "3", "-i", "0.2", "-W", "1", l.bHost).CombinedOutput(); err != nil {
		t.Fatalf("the host's own address stopped answering: %v\n%s", err, out)
	}
}
