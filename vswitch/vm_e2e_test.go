package vswitch

import (
	"fmt"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/xvswitch/xvswitch/portspec"
	"github.com/xvswitch/xvswitch/test/qemu"
	"github.com/xvswitch/xvswitch/test/require"
)

// TestVMToVMReference runs the harness's reference topology on xvswitch
// instead of DPDK: a guest's two NICs (eth1 in its own namespace inside
// the guest) on two vhost-user ports of the learning bridge; eth0 pings
// eth1 and sends a TCP stream to it across the switch. Both ring kinds.
func TestVMToVMReference(t *testing.T) {
	require.Root(t)
	require.Commands(t, "qemu-system-x86_64")
	qemu.EnsureGuest(t)
	for _, packed := range []bool{true, false} {
		t.Run(ringName(packed), func(t *testing.T) {
			dir := t.TempDir()
			s := startTestSwitch(t, Config{Workers: 1})
			t.Cleanup(s.removeAll)
			sock := [2]string{filepath.Join(dir, "vm0.sock"), filepath.Join(dir, "vm1.sock")}
			for i, p := range sock {
				if err := s.AddVhost(portspec.Vhost{Name: fmt.Sprint("vm", i), Path: p, Queues: 1}); err != nil {
					t.Fatal(err)
				}
			}
			cfg := qemu.ReferenceGuestConfig(sock[0], sock[1], packed)
			run := qemu.StartGuest(t, cfg).Wait()
			run.RequireOK(t, cfg)
			for nic := 0; nic < 2; nic++ {
				if got := run.HasFeature(nic, qemu.VirtioFRingPacked); got != packed {
					t.Errorf("nic %d: RING_PACKED = %v, want %v", nic, got, packed)
				}
			}
			st := s.Stats()
			t.Logf("stats: %+v", st)
			ping := run.Result("ping")
			for _, p := range st {
				if p.TxPackets < uint64(ping.Received) || p.RxPackets < uint64(ping.Received) {
					t.Errorf("port %s: rx %d tx %d, fewer than the %d echoes that crossed it", p.Name, p.RxPackets, p.TxPackets, ping.Received)
				}
				// A Linux guest's receive buffers start a line with the
				// header: its short frames go as whole lines with
				// streaming stores, as a new ring does until it has
				// measured (far more bursts than this test makes).
				if p.StreamedFrames > p.CopiedFrames || runtime.GOARCH == "amd64" && p.StreamedFrames == 0 {
					t.Errorf("port %s: %d of %d copied frames streamed, want some and no more", p.Name, p.StreamedFrames, p.CopiedFrames)
				}
			}
			balance(t, s)
		})
	}
}

func ringName(packed bool) string {
	if packed {
		return "packed"
	}
	return "split"
}
