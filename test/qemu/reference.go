package qemu

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/xvswitch/xvswitch/test/require"
	"github.com/xvswitch/xvswitch/test/testpmd"
)

// The reference topology: what xvswitch's own vhost-user back-end must
// later match, proven here with DPDK alone. A guest has two virtio-net
// NICs on a dpdk-testpmd vhost-user back-end that forwards port 0 <-> 1
// (io mode); eth1 lives in its own namespace inside the guest, so eth0's
// stack reaches eth1's address only across the back-end.

// Reference addresses and the inner namespace of eth1.
const (
	RefAddr0  = "10.66.0.1"
	RefAddr1  = "10.66.0.2"
	RefNetns  = "far"
	RefPrefix = 24
)

// VirtioFRingPacked is VIRTIO_F_RING_PACKED, the feature bit a guest's
// driver negotiates for the packed virtqueue.
const VirtioFRingPacked = 34

// ReferenceGuestConfig is the guest of the reference topology on the two
// vhost-user sockets: eth0 (RefAddr0) in the guest's root namespace, eth1
// (RefAddr1) in RefNetns; it pings eth1 from eth0 and sends a TCP stream
// across. packed selects the ring kind of both NICs.
func ReferenceGuestConfig(sock0, sock1 string, packed bool) GuestConfig {
	cidr := func(a string) string { return a + "/24" }
	return GuestConfig{
		NICs: []GuestNIC{
			{Socket: sock0, Packed: packed, Addr: cidr(RefAddr0)},
			{Socket: sock1, Packed: packed, Addr: cidr(RefAddr1), Netns: RefNetns},
		},
		Commands: []GuestCommand{
			GuestPing("ping", "", RefAddr1, 5, 56),
			GuestTCP("tcp", RefNetns, RefAddr1, "", 5001, 64*1024),
		},
		Timeout: 90 * time.Second,
	}
}

// ReferenceRun is the outcome of one run of the reference topology.
type ReferenceRun struct {
	Config GuestConfig
	Guest  *GuestRun
	// Fwd is the back-end's forward statistics (port 0 and 1 are the
	// guest's eth0 and eth1).
	Fwd testpmd.FwdStats
}

// RunReference runs the reference topology once with DPDK's back-end and
// returns what the guest and testpmd reported; the caller judges (see
// CheckReference). Needs root, dpdk-testpmd and qemu-system-x86_64.
func RunReference(t testing.TB, packed bool) *ReferenceRun {
	t.Helper()
	require.Root(t)
	require.Commands(t, "qemu-system-x86_64", "dpdk-testpmd")
	EnsureGuest(t)
	dir := t.TempDir()
	sock0, sock1 := filepath.Join(dir, "ref0.sock"), filepath.Join(dir, "ref1.sock")
	tp := testpmd.Start(t, testpmd.Config{
		Name:  "ref",
		Ports: []testpmd.Port{{Kind: testpmd.VhostUser, Path: sock0}, {Kind: testpmd.VhostUser, Path: sock1}},
		Mode:  "io",
	})
	cfg := ReferenceGuestConfig(sock0, sock1, packed)
	g := StartGuest(t, cfg)
	run := g.Wait()
	fwd, err := tp.Stop()
	if err != nil {
		t.Errorf("reference back-end: %v", err)
	}
	t.Logf("reference (packed=%v): %v wall; guest script started at uptime %.2fs, ended at %.2fs; back-end forwarded %d+%d frames",
		packed, run.Duration.Round(time.Millisecond), run.BeginUptime, run.EndUptime,
		fwd.Ports[0].TxPackets, fwd.Ports[1].TxPackets)
	return &ReferenceRun{Config: cfg, Guest: run, Fwd: fwd}
}

// CheckReference fails t unless the run is what the reference promises:
// every ping answered and the TCP stream intact, across the back-end (it
// forwarded at least the pings and their replies each way), and both NICs
// negotiated RING_PACKED exactly when packed.
func CheckReference(t testing.TB, r *ReferenceRun, packed bool) {
	t.Helper()
	r.Guest.RequireOK(t, r.Config)
	for nic := 0; nic < 2; nic++ {
		if got := r.Guest.HasFeature(nic, VirtioFRingPacked); got != packed {
			t.Errorf("nic %d: RING_PACKED negotiated = %v with packed=%v (features %s)",
				nic, got, packed, r.Guest.NIC(nic).Features)
		}
	}
	ping := r.Guest.Result("ping")
	for port := 0; port < 2; port++ {
		if tx := r.Fwd.Ports[port].TxPackets; tx < uint64(ping.Received) {
			t.Errorf("back-end port %d sent %d frames, fewer than the %d ping replies/requests that crossed it",
				port, tx, ping.Received)
		}
	}
}
