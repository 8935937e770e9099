package bpf

import (
	"crypto/rand"
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/xvswitch/xvswitch/test/require"
)

func randomVMMAC() net.HardwareAddr {
	m := make(net.HardwareAddr, 6)
	_, _ = rand.Read(m)
	m[0] = 0x02 // locally administered unicast
	return m
}

// ping pings ip from the namespace and insists every echo is answered.
func (l *lab) ping(t *testing.T, ip string, n int) {
	t.Helper()
	out := l.NS.MustRun(t, "ping", "-c", itoa(n), "-i", "0.2", "-W", "5", ip)
	if !strings.Contains(out, itoa(n)+" received") {
		t.Fatalf("ping %s: not every echo answered:\n%s", ip, out)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// The MAC policy steers exactly the frames to VMs' MACs (and broadcast and
// multicast when asked) and leaves the host's own traffic on the same NIC
// to the kernel, which keeps answering.
func TestMACPolicy(t *testing.T) {
	t.Parallel()
	require.Commands(t, "ping")
	l := newLab(t, Policy{Mode: ModeMAC})
	vm := randomVMMAC()
	if err := l.S.AddMAC(vm, 1); err != nil {
		t.Fatal(err)
	}
	rx0 := rxPackets(t, l.Outer)
	c0 := l.counters(t)

	// The host's address on the NIC: ARP and ping work, nothing steered.
	l.ping(t, l.OuterIP, 3)
	d := l.waitDelta(t, c0, Counters{NotOwnedPassed: 4}) // ARP request + 3 echoes
	if d.Steered() != 0 {
		t.Fatalf("host traffic was steered: %+v", d)
	}
	// From here on no ARP broadcasts from the namespace: exact counts.
	l.neigh(t, l.OuterIP, l.OuterMAC)

	// Frames to the VM's MAC are steered; with no socket in the slot the
	// redirect falls back to the kernel, and says so.
	l.neigh(t, l.VMIP, vm.String())
	c1 := l.counters(t)
	l.udp(t, l.VMIP+":9", 5)
	d = l.waitDelta(t, c1, Counters{NoSocketPassed: 5})
	if d.NoSocketPassed != 5 || d.Redirected != 0 || d.SteeredBroadcast != 0 || d.SteeredMulticast != 0 {
		t.Fatalf("5 frames to VM MAC %s: %+v", vm, d)
	}

	// A removed MAC is no longer the switch's.
	if err := l.S.RemoveMAC(vm); err != nil {
		t.Fatal(err)
	}
	c1 = l.counters(t)
	l.udp(t, l.VMIP+":9", 3)
	d = l.waitDelta(t, c1, Counters{NotOwnedPassed: 3})
	if d.Steered() != 0 {
		t.Fatalf("frames to a removed MAC were steered: %+v", d)
	}
	if err := l.S.AddMAC(vm, 1); err != nil {
		t.Fatal(err)
	}

	// Broadcast: the kernel's unless the policy says otherwise.
	c1 = l.counters(t)
	l.udp(t, l.BcastIP+":9", 4)
	d = l.waitDelta(t, c1, Counters{GroupPassed: 4})
	if d.Steered() != 0 || d.SteeredBroadcast != 0 || d.NotOwnedPassed != 0 {
		t.Fatalf("broadcast steered with Broadcast off: %+v", d)
	}
	if err := l.S.SetPolicy(Policy{Mode: ModeMAC, Broadcast: true}); err != nil {
		t.Fatal(err)
	}
	c1 = l.counters(t)
	l.udp(t, l.BcastIP+":9", 4)
	d = l.waitDelta(t, c1, Counters{NoSocketPassed: 4, SteeredBroadcast: 4})
	if d.NoSocketPassed != 4 || d.SteeredBroadcast != 4 || d.SteeredMulticast != 0 || d.NotOwnedPassed != 0 {
		t.Fatalf("4 broadcasts with Broadcast on: %+v", d)
	}

	// Multicast (239.1.2.3 -> 01:00:5e:01:02:03) likewise.
	c1 = l.counters(t)
	l.udp(t, "239.1.2.3:9", 4)
	d = l.waitDelta(t, c1, Counters{GroupPassed: 4})
	if d.Steered() != 0 || d.SteeredMulticast != 0 || d.NotOwnedPassed != 0 {
		t.Fatalf("multicast steered with Multicast off: %+v", d)
	}
	if err := l.S.SetPolicy(Policy{Mode: ModeMAC, Multicast: true}); err != nil {
		t.Fatal(err)
	}
	if p, err := l.S.Policy(); err != nil || p != (Policy{Mode: ModeMAC, Multicast: true}) {
		t.Fatalf("Policy() = %v, %v", p, err)
	}
	c1 = l.counters(t)
	l.udp(t, "239.1.2.3:9", 4)
	l.udp(t, l.BcastIP+":9", 2) // broadcast is off again
	d = l.waitDelta(t, c1, Counters{NoSocketPassed: 4, SteeredMulticast: 4, GroupPassed: 2})
	if d.NoSocketPassed != 4 || d.SteeredMulticast != 4 || d.SteeredBroadcast != 0 || d.GroupPassed != 2 {
		t.Fatalf("4 multicasts with Multicast on, 2 broadcasts with Broadcast off: %+v", d)
	}

	// And the host still answers on the NIC with all that going on.
	l.ping(t, l.OuterIP, 2)

	// Every frame the kernel's rx counter saw was counted once by verdict.
	l.waitDelta(t, c0, Counters{})
	total := l.counters(t).Sub(c0).Total()
	if rx := rxPackets(t, l.Outer) - rx0; rx != total {
		t.Errorf("outer end received %d frames, program counted %d", rx, total)
	}
}

// Policy "all" steers everything; "none" nothing. With no socket in the
// slot, steered frames still reach the kernel, so even "all" keeps the
// host reachable until the switch puts its socket in.
func TestAllAndNonePolicy(t *testing.T) {
	t.Parallel()
	require.Commands(t, "ping")
	l := newLab(t, Policy{Mode: ModeAll})
	c0 := l.counters(t)
	l.ping(t, l.OuterIP, 3)
	d := l.waitDelta(t, c0, Counters{NoSocketPassed: 4, SteeredBroadcast: 1}) // ARP + 3 echoes
	if d.NotOwnedPassed != 0 || d.Redirected != 0 {
		t.Fatalf("policy all: %+v", d)
	}
	l.neigh(t, l.OuterIP, l.OuterMAC) // no ARP from here on: exact counts
	l.neigh(t, l.VMIP, randomVMMAC().String())
	c1 := l.counters(t)
	l.udp(t, l.VMIP+":9", 3) // to a MAC nobody registered: "all" takes it anyway
	l.udp(t, "239.1.2.3:9", 2)
	d = l.waitDelta(t, c1, Counters{NoSocketPassed: 5, SteeredMulticast: 2})
	if d.NotOwnedPassed != 0 || d.NoSocketPassed != 5 || d.SteeredMulticast != 2 {
		t.Fatalf("policy all, 3 unicast + 2 multicast: %+v", d)
	}

	if err := l.S.SetPolicy(Policy{Mode: ModeNone, Broadcast: true, Multicast: true}); err != nil {
		t.Fatal(err)
	}
	c1 = l.counters(t)
	l.udp(t, l.VMIP+":9", 3)
	l.udp(t, l.BcastIP+":9", 2)
	d = l.waitDelta(t, c1, Counters{NotOwnedPassed: 5})
	if d.Steered() != 0 || d.NotOwnedPassed != 5 {
		t.Fatalf("policy none: %+v", d)
	}
}
