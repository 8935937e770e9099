package qemu

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/xvswitch/xvswitch/test/require"
	"github.com/xvswitch/xvswitch/test/testpmd"
)

// TestGuestVhostVariants exercises the NIC options the reference does not,
// on DPDK's vhost-user back-end (io forwarding 0 <-> 1): QEMU as the socket
// server with the back-end connecting to it (xvswitch's client mode), QEMU
// as a client started before its back-end (reconnect=1), two
// queue pairs on two vCPUs, mrg_rxbuf, indirect_desc and event_idx off, and
// a 9000-byte MTU. The guest must negotiate exactly that and still move a
// jumbo ping and a TCP stream between its namespaces across the back-end.
func TestGuestVhostVariants(t *testing.T) {
	require.Long(t)
	require.Root(t)
	require.Commands(t, "qemu-system-x86_64", "dpdk-testpmd")
	EnsureGuest(t)
	dir := t.TempDir()
	sock0, sock1 := filepath.Join(dir, "v0.sock"), filepath.Join(dir, "v1.sock")
	nic := func(sock string) GuestNIC {
		return GuestNIC{Socket: sock, Packed: true, Queues: 2, MTU: 9000,
			MrgRxbuf: ToggleOff, IndirectDesc: ToggleOff, EventIdx: ToggleOff}
	}
	n0, n1 := nic(sock0), nic(sock1)
	n0.Server, n0.Addr = true, "10.67.0.1/24"
	// NIC 1 is a client that retries: QEMU starts before its back-end.
	n1.Reconnect, n1.Addr, n1.Netns = 1, "10.67.0.2/24", "far"
	cfg := GuestConfig{
		NICs: []GuestNIC{n0, n1},
		Commands: []GuestCommand{
			GuestPing("ping", "", "10.67.0.2", 3, 56),
			GuestPing("jumbo", "", "10.67.0.2", 2, 8000),
			GuestTCP("tcp", "far", "10.67.0.2", "", 5002, 128*1024),
			GuestShell("queues", "", "ls /sys/class/net/eth0/queues"),
		},
		Timeout: 120 * time.Second,
	}
	g := StartGuest(t, cfg)
	tp := testpmd.Start(t, testpmd.Config{
		Name: "var",
		Ports: []testpmd.Port{
			{Kind: testpmd.VhostUser, Path: sock0, Queues: 2, Client: true},
			{Kind: testpmd.VhostUser, Path: sock1, Queues: 2},
		},
		Mode: "io",
	})
	r := g.Wait()
	fwd, err := tp.Stop()
	if err != nil {
		t.Errorf("back-end: %v", err)
	}
	t.Logf("variants: %v wall; script from uptime %.2fs to %.2fs; back-end forwarded %d+%d frames",
		r.Duration.Round(time.Millisecond), r.BeginUptime, r.EndUptime, fwd.Ports[0].TxPackets, fwd.Ports[1].TxPackets)
	requireSaneClock(t, r)
	r.RequireOK(t, cfg)
	const (
		netMTU       = 3
		mrgRxbuf     = 15
		mq           = 22
		indirectDesc = 28
		eventIdx     = 29
	)
	for i := 0; i < 2; i++ {
		f := r.NIC(i).Features
		if !r.HasFeature(i, VirtioFRingPacked) || !r.HasFeature(i, mq) || !r.HasFeature(i, netMTU) {
			t.Errorf("nic %d: want RING_PACKED, MQ and MTU negotiated: %s", i, f)
		}
		for _, bit := range []int{mrgRxbuf, indirectDesc, eventIdx} {
			if r.HasFeature(i, bit) {
				t.Errorf("nic %d: bit %d negotiated though turned off: %s", i, bit, f)
			}
		}
		if m := r.NIC(i).MTU; m != 9000 {
			t.Errorf("nic %d: MTU %d, want 9000", i, m)
		}
	}
	if q := strings.Join(r.Result("queues").Output, " "); !strings.Contains(q, "rx-1") || !strings.Contains(q, "tx-1") {
		t.Errorf("eth0 should have two queue pairs: %q", q)
	}
}
