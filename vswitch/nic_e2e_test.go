package vswitch

import (
	"strings"
	"testing"

	"github.com/xvswitch/xvswitch/portspec"
	"github.com/xvswitch/xvswitch/test/netns"
	"github.com/xvswitch/xvswitch/test/require"
)

// TestNICBridgePing joins two veth "NICs" through the learning bridge: a
// host in one namespace pings a host in the other, every frame crossing
// XDP -> AF_XDP RX -> the switch -> AF_XDP TX. Meanwhile the first
// namespace still reaches the host's own address on the outer end, which
// the steering program leaves to the kernel.
func TestNICBridgePing(t *testing.T) {
	require.Root(t)
	require.Commands(t, "ping")
	// The first NIC has two queues: the port binds a socket to each.
	v1 := netns.NewVeth(t, netns.VethOptions{Queues: 2, InnerAddr: "10.91.0.1/24", OuterAddr: "10.91.1.1/24"})
	v2 := netns.NewVeth(t, netns.VethOptions{InnerAddr: "10.91.0.2/24"})
	v1.NS.MustRun(t, "ip", "addr", "add", "10.91.1.2/24", "dev", v1.Inner)

	s := startTestSwitch(t, Config{Workers: 1})
	for _, v := range []*netns.Veth{v1, v2} {
		if err := s.AddNIC(portspec.NIC{Name: v.Outer, Ifname: v.Outer, Mode: portspec.ModeCopy}); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(s.removeAll)
	if ports := s.Ports(); ports[0].Queues != 2 || ports[1].Queues != 1 {
		t.Fatalf("queues: %+v", ports)
	}

	out, err := v1.NS.Exec("ping", "-c", "5", "-i", "0.2", "-W", "2", "10.91.0.2").CombinedOutput()
	if err != nil || !strings.Contains(string(out), " 0% packet loss") && !strings.Contains(string(out), "5 received") {
		// ARP may cost the first echo; anything less than 4 of 5 is a failure.
		if !strings.Contains(string(out), "4 received") {
			t.Fatalf("ping across the switch: %v\n%s\nstats: %+v", err, out, s.Stats())
		}
	}
	host, err := v1.NS.Exec("ping", "-c", "3", "-i", "0.2", "-W", "2", "10.91.1.1").CombinedOutput()
	if err != nil {
		t.Fatalf("the host's own address stopped answering while xvswitch runs: %v\n%s", err, host)
	}
	st := s.Stats()
	var rx, tx uint64
	for _, p := range st {
		rx += p.RxPackets
		tx += p.TxPackets
	}
	if rx < 8 || tx < 8 {
		t.Fatalf("echo requests and replies should have crossed the switch: %+v", st)
	}
	// What the switch received from each NIC, the XDP program redirected
	// or, for group frames, passed to the kernel, which copied them to
	// the switch; broadcast ARP, the host's included, went to the kernel.
	for _, p := range st {
		if k := p.Kernel; k["xdp_redirected"]+k["xdp_group_passed"] < p.RxPackets || k["af_xdp_rx_dropped"] != 0 || k["af_packet_dropped"] != 0 {
			t.Errorf("port %s: rx %d, kernel counters %v", p.Name, p.RxPackets, k)
		}
	}
	if k := st[0].Kernel; k["xdp_group_passed"] == 0 || k["xdp_host_arp_passed"] != 0 {
		t.Errorf("broadcast ARP should all have been passed as group frames: %v", k)
	}
	balance(t, s)
}
