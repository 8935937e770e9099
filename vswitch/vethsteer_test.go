package vswitch

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/xvswitch/xvswitch/portspec"
	"github.com/xvswitch/xvswitch/test/netns"
	"github.com/xvswitch/xvswitch/test/require"
)

// TestVethSteerQueues: the test harness's tcx egress program
// (netns.Veth.SteerQueues) puts frames for one MAC on queue 0 of a
// 2-queue veth and everything else on queue 1, as the NIC port's
// per-queue counters show: echo requests to host B's MAC all on 0
// (unsteered, this flow hashes to 1 here), those to a VM's MAC on 1.
func TestVethSteerQueues(t *testing.T) {
	require.Root(t)
	require.Commands(t, "ping")
	v1 := netns.NewVeth(t, netns.VethOptions{Queues: 2, InnerAddr: "10.93.0.1/24"})
	v2 := netns.NewVeth(t, netns.VethOptions{InnerAddr: "10.93.0.2/24"})
	for _, v := range []*netns.Veth{v1, v2} {
		v.NS.MustRun(t, "sysctl", "-q", "-w", "net.ipv6.conf.all.disable_ipv6=1")
	}
	bMAC := netns.MAC(t, v2.NS, v2.Inner)
	v1.SteerQueues(t, map[string]int{bMAC: 0}, 1)
	s := startTestSwitch(t, Config{Workers: 1})
	for _, v := range []*netns.Veth{v1, v2} {
		if err := s.AddNIC(portspec.NIC{Name: v.Outer, Ifname: v.Outer, Mode: portspec.ModeCopy}); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(s.removeAll)
	if !pingUntil(v1.NS, "10.93.0.2", 5*time.Second) {
		t.Fatalf("A cannot reach B: %+v", s.Stats())
	}
	before := s.Stats()[0].Queues // v1's port
	if out, err := v1.NS.Exec("ping", "-c", "5", "-i", "0.2", "-W", "2", "10.93.0.2").CombinedOutput(); err != nil {
		t.Fatalf("ping: %v\n%s", err, out)
	}
	// Two echo requests to a VM's MAC (a port with mac=, static in the
	// FDB, so the XDP program steers its unicast): they take the default.
	vm, err := portspec.ParseVhost(filepath.Join(t.TempDir(), "vmd.sock") + ",mac=52:54:00:00:93:77")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.AddVhost(vm); err != nil {
		t.Fatal(err)
	}
	v1.NS.MustRun(t, "arp", "-s", "10.93.0.77", "52:54:00:00:93:77")
	waitFor(t, "the VM's MAC in v1's XDP map", func() bool {
		m, _ := s.byName[v1.Outer].drv.(*nicPort).bound.steer.MACs()
		_, ok := m["52:54:00:00:93:77"]
		return ok
	})
	_ = v1.NS.Exec("ping", "-c", "2", "-i", "0.2", "-W", "1", "10.93.0.77").Run()
	after := s.Stats()[0].Queues
	q0 := after[0].RxPackets - before[0].RxPackets
	q1 := after[1].RxPackets - before[1].RxPackets
	if q0 < 5 || q1 < 2 {
		t.Fatalf("per-queue rx: queue 0 got %d (want the 5 echo requests to %s), queue 1 %d (want the 2 echo requests to the VM)", q0, bMAC, q1)
	}
	balance(t, s)
}

// pingUntil reports whether ns gets an echo reply from ip within the
// time given (the first frames across a fresh switch teach it the MACs).
func pingUntil(ns *netns.Namespace, ip string, within time.Duration) bool {
	deadline := time.Now().Add(within)
	for {
		if ns.Exec("ping", "-c", "1", "-W", "1", ip).Run() == nil {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
}
