package test

import (
	"strings"
	"testing"
	"time"
)

// TestGuestSelfTest boots the guest with no vhost-user back-end at all: its
// two NICs are wired to each other by a QEMU hub (-netdev hubport), eth1
// sits in its own namespace inside the guest, and the guest pings and sends
// a TCP stream from eth0's stack to eth1's address. That can only work
// across the wire (the namespaces share no loopback), so it proves the
// image, the init script, namespaces, ping, nc, the checksums, the feature
// report and the result plumbing, everything but vhost-user itself.
func TestGuestSelfTest(t *testing.T) {
	RequireLong(t)
	cfg := GuestConfig{
		NICs: []GuestNIC{
			{Netdev: "hubport,hubid=0", Addr: "10.99.0.1/24", Packed: true, MTU: 9000},
			{Netdev: "hubport,hubid=0", Addr: "10.99.0.2/24", Netns: "peer", MTU: 9000},
		},
		Commands: []GuestCommand{
			GuestPing("ping", "", "10.99.0.2", 3, 56),
			GuestPing("ping-jumbo", "", "10.99.0.2", 2, 8000),
			GuestTCP("tcp", "peer", "10.99.0.2", "", 5001, 300000),
			GuestShell("eth0-tx", "", "cat /sys/class/net/eth0/statistics/tx_packets"),
			GuestShell("peer-sees-one-nic", "peer", "ip -o link show | grep -v ' lo:' | wc -l"),
			GuestShell("fails", "", "echo about to fail; exit 3"),
		},
		Timeout: 60 * time.Second,
	}
	g := StartGuest(t, cfg)
	r := g.Wait()
	if testing.Verbose() {
		t.Logf("reports:\n%s\nconsole:\n%s", r.Reports, r.Console)
	}
	t.Logf("guest run: %v wall, guest uptime %.2fs at script start, %.2fs at end",
		r.Duration.Round(time.Millisecond), r.BeginUptime, r.EndUptime)

	// The deliberate failure must be reported as one, with its output.
	f := r.Result("fails")
	if f.OK || f.RC != 3 || len(f.Output) != 1 || f.Output[0] != "about to fail" {
		t.Errorf("failing command reported as %+v", f)
	}
	cmds := cfg.Commands[:len(cfg.Commands)-1]
	if fl := r.Failures(cmds); len(fl) > 0 {
		t.Fatalf("guest run failed:\n  %s", strings.Join(fl, "\n  "))
	}
	for _, name := range []string{"ping", "ping-jumbo"} {
		p := r.Result(name)
		if p.Transmitted != p.Received || p.Received == 0 {
			t.Errorf("%s: %d transmitted, %d received", name, p.Transmitted, p.Received)
		}
	}
	tcp := r.Result("tcp")
	if tcp.Bytes != 300000 || tcp.SHA256 != tcp.SentSHA256 || len(tcp.SHA256) != 64 {
		t.Errorf("tcp: got %d bytes %s, sent %d bytes %s", tcp.Bytes, tcp.SHA256, tcp.SentBytes, tcp.SentSHA256)
	}
	// 3+2 pings (jumbo ones unfragmented at MTU 9000) plus the TCP stream
	// left through eth0: the traffic crossed the wire.
	if tx := r.Result("eth0-tx"); len(tx.Output) != 1 || atoiOr(tx.Output[0], 0) < 5+10 {
		t.Errorf("eth0 sent too few frames for the traffic above: %q", tx.Output)
	}
	if n := r.Result("peer-sees-one-nic"); len(n.Output) != 1 || strings.TrimSpace(n.Output[0]) != "1" {
		t.Errorf("namespace peer should hold exactly one NIC, has %q", n.Output)
	}
	n0, n1 := r.NIC(0), r.NIC(1)
	if n0.MTU != 9000 || n1.MTU != 9000 {
		t.Errorf("host_mtu=9000 not taken: MTUs %d, %d", n0.MTU, n1.MTU)
	}
	if n1.Netns != "peer" || n0.Netns != "" {
		t.Errorf("namespaces: nic0 %q, nic1 %q", n0.Netns, n1.Netns)
	}
	// QEMU's own virtio-net offers the packed ring: packed=on negotiates
	// it, packed=off does not. VIRTIO_F_VERSION_1 (32) is on both
	// (disable-legacy=on), VIRTIO_NET_F_MTU (3) too.
	const ringPacked, version1, netMTU = 34, 32, 3
	if !r.HasFeature(0, ringPacked) || r.HasFeature(1, ringPacked) {
		t.Errorf("RING_PACKED: nic0 (packed=on) %v, nic1 (packed=off) %v; features %s / %s",
			r.HasFeature(0, ringPacked), r.HasFeature(1, ringPacked), n0.Features, n1.Features)
	}
	for i := 0; i < 2; i++ {
		if !r.HasFeature(i, version1) || !r.HasFeature(i, netMTU) {
			t.Errorf("nic %d: VERSION_1 or NET_F_MTU missing: %s", i, r.NIC(i).Features)
		}
	}
}

func atoiOr(s string, def int) int {
	n := 0
	s = strings.TrimSpace(s)
	if s == "" {
		return def
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return def
		}
		n = n*10 + int(c-'0')
	}
	return n
}
