package vswitch

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/xvswitch/xvswitch/ctl"
	"github.com/xvswitch/xvswitch/portspec"
	"github.com/xvswitch/xvswitch/test/qemu"
	"github.com/xvswitch/xvswitch/test/require"
	"github.com/xvswitch/xvswitch/test/testpmd"
	"github.com/xvswitch/xvswitch/virtionet"
)

// offloadTransfer is how many bytes TestOffloadsQEMU sends between guests.
const offloadTransfer = 64 << 20

// TestOffloadsQEMU: two QEMU guests on two vhost ports, 64 MB of TCP from
// one to the other, sha256 checked, with the ports' offloads on (the
// guests negotiate CSUM/TSO: TSO frames cross the switch whole) and off
// (1500-byte frames), and from a TSO guest to one without offloads (the
// switch segments). It logs the frames through the switch and the
// transfer's time inside the sender (BENCHMARKS.md, "Offloads: TCP
// between two QEMU guests").
func TestOffloadsQEMU(t *testing.T) {
	require.Root(t)
	require.Long(t)
	require.Commands(t, "qemu-system-x86_64")
	qemu.EnsureGuest(t)
	for _, tc := range []struct {
		name       string
		rxOff, off bool // the receiver's port, the sender's port: offloads=off
	}{{"offloads-on", false, false}, {"offloads-off", true, true}, {"segmented-for-receiver", true, false}} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			s := startTestSwitch(t, Config{Workers: 1})
			t.Cleanup(s.removeAll)
			sock := [2]string{filepath.Join(dir, "rx.sock"), filepath.Join(dir, "tx.sock")}
			for i, p := range sock {
				noOff := []bool{tc.rxOff, tc.off}[i]
				if err := s.AddVhost(portspec.Vhost{Name: fmt.Sprint("vm", i), Path: p, Queues: 1, NoOffloads: noOff}); err != nil {
					t.Fatal(err)
				}
			}
			before := s.Stats()
			secs, srun, rrun := guestTransfer(t, sock[0], sock[1])
			if got := srun.HasFeature(0, virtionet.FeatureHostTSO4); got == tc.off {
				t.Errorf("sender: HOST_TSO4 negotiated %v with offloads=off %v", got, tc.off)
			}
			if got := rrun.HasFeature(0, virtionet.FeatureGuestTSO4); got == tc.rxOff {
				t.Errorf("receiver: GUEST_TSO4 negotiated %v with offloads=off %v", got, tc.rxOff)
			}
			// QEMU offers the guest CTRL_GUEST_OFFLOADS on its own control
			// queue (docs/offloads.md); logged, the switch never sees it.
			t.Logf("guest features: sender %s, receiver %s (CTRL_GUEST_OFFLOADS %v)", srun.NIC(0).Features, rrun.NIC(0).Features,
				srun.HasFeature(0, virtionet.FeatureCtrlGuestOffloads))
			after := s.Stats()
			delta := func(name string, f func(p ctl.PortCounters) uint64) uint64 {
				return f(statsOf(after, name)) - f(statsOf(before, name))
			}
			fromSender := delta("vm1", func(p ctl.PortCounters) uint64 { return p.RxPackets })
			toReceiver := delta("vm0", func(p ctl.PortCounters) uint64 { return p.TxPackets })
			bytesIn := delta("vm1", func(p ctl.PortCounters) uint64 { return p.RxBytes })
			// Of the frames copied into the receiver, those whose first
			// line (a Linux guest's buffer starts one with the header)
			// went with streaming stores, while its ring measured that
			// cheaper.
			streamed := delta("vm0", func(p ctl.PortCounters) uint64 { return p.StreamedFrames })
			if copied := delta("vm0", func(p ctl.PortCounters) uint64 { return p.CopiedFrames }); streamed > copied {
				t.Errorf("receiver: %d frames streamed of %d copied", streamed, copied)
			}
			t.Logf("%s: %d MB in %.1f s (%.1f MB/s) inside the sender; frames sender->switch %d (%.0f bytes each), switch->receiver %d (%d streamed); segment copies %d",
				tc.name, offloadTransfer>>20, secs, float64(offloadTransfer>>20)/secs, fromSender, float64(bytesIn)/float64(max(fromSender, 1)), toReceiver,
				streamed, statsOf(after, "vm0").SegmentCopies)
			balance(t, s)
		})
	}
}

// TestOffloadsQEMUDPDK is TestOffloadsQEMU's transfer on DPDK's vhost PMD
// (testpmd io forwarding between two net_vhost ports) with its TSO devarg
// on and off, for BENCHMARKS.md's comparison.
func TestOffloadsQEMUDPDK(t *testing.T) {
	require.Root(t)
	require.Long(t)
	require.Commands(t, "qemu-system-x86_64", "dpdk-testpmd")
	qemu.EnsureGuest(t)
	for _, tso := range []bool{true, false} {
		t.Run(map[bool]string{true: "tso-on", false: "tso-off"}[tso], func(t *testing.T) {
			dir := t.TempDir()
			sock := [2]string{filepath.Join(dir, "rx.sock"), filepath.Join(dir, "tx.sock")}
			dev := map[bool]string{true: "tso=1", false: "tso=0"}[tso]
			tp := testpmd.Start(t, testpmd.Config{
				Name:  "offl",
				Ports: []testpmd.Port{{Kind: testpmd.VhostUser, Path: sock[0], Devargs: dev}, {Kind: testpmd.VhostUser, Path: sock[1], Devargs: dev}},
				Mode:  "io",
			})
			secs, srun, rrun := guestTransfer(t, sock[0], sock[1])
			fwd, err := tp.Stop()
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("DPDK %s: %d MB in %.1f s (%.1f MB/s) inside the sender; frames sender->testpmd %d, testpmd->receiver %d; HOST_TSO4 %v GUEST_TSO4 %v",
				dev, offloadTransfer>>20, secs, float64(offloadTransfer>>20)/secs, fwd.Ports[1].RxPackets, fwd.Ports[0].TxPackets,
				srun.HasFeature(0, virtionet.FeatureHostTSO4), rrun.HasFeature(0, virtionet.FeatureGuestTSO4))
		})
	}
}

// statsOf is port name's row of st.
func statsOf(st []ctl.PortCounters, name string) ctl.PortCounters {
	for _, p := range st {
		if p.Name == name {
			return p
		}
	}
	return ctl.PortCounters{}
}

// guestTransfer boots a receiving guest on socket rx, then a sending one
// on tx, sends offloadTransfer bytes from the second to the first with
// sha256 checked, and returns the transfer's time measured inside the
// sender and both guests' runs.
func guestTransfer(t *testing.T, rx, tx string) (float64, *qemu.GuestRun, *qemu.GuestRun) {
	t.Helper()
	const timeout = 240 * time.Second
	recv := qemu.GuestTCPReceive("rx", "", 5001, offloadTransfer)
	recv.Timeout = timeout
	rg := qemu.StartGuest(t, qemu.GuestConfig{
		NICs:     []qemu.GuestNIC{{Socket: rx, Packed: true, Addr: "10.88.0.1/24"}},
		Commands: []qemu.GuestCommand{recv},
		Timeout:  timeout + 60*time.Second, MemoryMB: 384,
	})
	if !rg.WaitReady("rx", 120*time.Second) {
		t.Fatal("the receiving guest never listened")
	}
	// The payload is made before the clock starts; nc -w 2 waits
	// up to 2 s for the receiver to close after the last byte, in
	// both runs alike.
	send := qemu.GuestShell("tx", "", fmt.Sprintf(
		"head -c %d /dev/urandom >/tmp/p && s=$(sha256sum </tmp/p | cut -d' ' -f1) && "+
			"t0=$(cut -d' ' -f1 /proc/uptime) && nc -w 2 10.88.0.1 5001 </tmp/p && "+
			"t1=$(cut -d' ' -f1 /proc/uptime) && echo \"sha=$s t0=$t0 t1=$t1\"", offloadTransfer))
	send.Timeout = timeout
	sg := qemu.StartGuest(t, qemu.GuestConfig{
		NICs:     []qemu.GuestNIC{{Socket: tx, Packed: true, Addr: "10.88.0.2/24"}},
		Commands: []qemu.GuestCommand{send},
		Timeout:  timeout + 60*time.Second, MemoryMB: 384,
	})
	srun := sg.Wait()
	rrun := rg.Wait()
	res, got := srun.Result("tx"), rrun.Result("rx")
	if !res.OK || !got.OK {
		t.Fatalf("sender %s %v; receiver %s", res.Detail, res.Output, got.Detail)
	}
	var sha string
	var t0, t1 float64
	for _, l := range res.Output {
		for _, f := range strings.Fields(l) {
			k, v, _ := strings.Cut(f, "=")
			switch k {
			case "sha":
				sha = v
			case "t0":
				t0, _ = strconv.ParseFloat(v, 64)
			case "t1":
				t1, _ = strconv.ParseFloat(v, 64)
			}
		}
	}
	if got.Bytes != offloadTransfer || sha == "" || got.SHA256 != sha {
		t.Fatalf("received %d bytes sha256 %s, sent %d sha256 %s", got.Bytes, got.SHA256, offloadTransfer, sha)
	}
	return t1 - t0, srun, rrun
}
