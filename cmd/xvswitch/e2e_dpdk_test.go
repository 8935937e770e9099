package main

import (
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/xvswitch/xvswitch/ctl"
	"github.com/xvswitch/xvswitch/test/netns"
	"github.com/xvswitch/xvswitch/test/require"
	"github.com/xvswitch/xvswitch/test/testpmd"
)

func rxPackets(t *testing.T, ns *netns.Namespace, ifname string) uint64 {
	t.Helper()
	out := ns.MustRun(t, "cat", "/sys/class/net/"+ifname+"/statistics/rx_packets")
	n, err := strconv.ParseUint(strings.TrimSpace(out), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func port(st []ctl.PortCounters, name string) ctl.PortCounters {
	for _, p := range st {
		if p.Name == name {
			return p
		}
	}
	return ctl.PortCounters{}
}

// TestVirtioUserToNIC: DPDK virtio-user (txonly) sends frames into a vhost
// port; xvswitch floods them (their destination is the namespace's MAC,
// not yet learned) out of the AF_XDP NIC, and the namespace counts them.
// Every frame testpmd sent is received by the switch, and each is either
// counted in the namespace or dropped with a reason.
func TestVirtioUserToNIC(t *testing.T) {
	require.Root(t)
	require.Commands(t, "dpdk-testpmd")
	for _, packed := range []bool{true, false} {
		t.Run(ringName(packed), func(t *testing.T) {
			v := netns.NewVeth(t, netns.VethOptions{InnerAddr: "10.94.0.1/24"})
			// No IPv6 chatter from the namespace while we count.
			v.NS.MustRun(t, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1")
			netns.MustRun(t, "sysctl", "-qw", "net.ipv6.conf."+v.Outer+".disable_ipv6=1")
			sock := filepath.Join(t.TempDir(), "vu.sock")
			d := startDaemon(t, "--nic", v.Outer+",mode=copy,name=nic0", "--vhost", sock+",name=vu", "--idle-after", "-1ns")
			innerMAC := netns.MAC(t, v.NS, v.Inner)
			tp := testpmd.Start(t, testpmd.Config{
				Name:        "vu-tx",
				Ports:       []testpmd.Port{{Kind: testpmd.VirtioUser, Path: sock, Packed: packed}},
				Mode:        "txonly",
				EthPeers:    map[int]string{0: innerMAC},
				Interactive: true,
				StatsPeriod: 200 * time.Millisecond,
				FwdCPUs:     []int{0},
			})
			before := rxPackets(t, v.NS, v.Inner)
			if err := tp.Cmd("start"); err != nil {
				t.Fatal(err)
			}
			if err := tp.WaitStats(func(m map[int]testpmd.PortStats) bool { return m[0].TxPackets > 20000 }, 20*time.Second); err != nil {
				t.Fatal(err)
			}
			fwd, err := tp.StopForwarding(10 * time.Second)
			if err != nil {
				t.Fatal(err)
			}
			sent := fwd.Ports[0].TxPackets
			var st []ctl.PortCounters
			// Wait until the switch has taken every frame testpmd sent.
			deadline := time.Now().Add(10 * time.Second)
			for {
				st = d.stats(t)
				if port(st, "vu").RxPackets >= sent || time.Now().After(deadline) {
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			time.Sleep(300 * time.Millisecond)
			st = d.stats(t)
			got := rxPackets(t, v.NS, v.Inner) - before
			vu, nic := port(st, "vu"), port(st, "nic0")
			t.Logf("testpmd sent %d; switch: vu rx %d, nic0 tx %d drops %v; namespace received %d", sent, vu.RxPackets, nic.TxPackets, nic.Drops, got)
			if vu.RxPackets != sent {
				t.Errorf("the switch received %d frames from virtio-user, testpmd sent %d", vu.RxPackets, sent)
			}
			if got != nic.TxPackets || got == 0 {
				t.Errorf("the namespace counted %d frames, the switch transmitted %d on the NIC", got, nic.TxPackets)
			}
			checkBalance(t, st)
		})
	}
}

// TestNICToVirtioUser: UDP datagrams sent from the namespace to a MAC
// configured on a vhost port are steered by XDP to AF_XDP and delivered to
// a DPDK virtio-user in rxonly, which counts every one.
func TestNICToVirtioUser(t *testing.T) {
	require.Root(t)
	require.Commands(t, "dpdk-testpmd")
	const vuMAC, vuIP, frames = "02:00:00:00:aa:01", "10.95.0.50", 3000
	for _, packed := range []bool{true, false} {
		t.Run(ringName(packed), func(t *testing.T) {
			v := netns.NewVeth(t, netns.VethOptions{InnerAddr: "10.95.0.1/24"})
			v.NS.MustRun(t, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1")
			v.NS.MustRun(t, "ip", "neigh", "add", vuIP, "lladdr", vuMAC, "dev", v.Inner)
			sock := filepath.Join(t.TempDir(), "vu.sock")
			d := startDaemon(t, "--nic", v.Outer+",mode=copy,name=nic0", "--vhost", sock+",name=vu,mac="+vuMAC)
			tp := testpmd.Start(t, testpmd.Config{
				Name:        "vu-rx",
				Ports:       []testpmd.Port{{Kind: testpmd.VirtioUser, Path: sock, Packed: packed, MAC: vuMAC, QueueSize: 1024}},
				Mode:        "rxonly",
				Interactive: true,
				StatsPeriod: 200 * time.Millisecond,
				FwdCPUs:     []int{0},
			})
			if err := tp.Cmd("start"); err != nil {
				t.Fatal(err)
			}
			// Paced so that neither the kernel's AF_XDP ring nor the
			// guest's ring overflows: this test counts, it does not race.
			payload := make([]byte, 100)
			if err := v.NS.Do(func() error {
				c, err := net.Dial("udp4", vuIP+":9")
				if err != nil {
					return err
				}
				defer c.Close()
				for i := 0; i < frames; i++ {
					if _, err := c.Write(payload); err != nil {
						return err
					}
					if i%100 == 99 {
						time.Sleep(2 * time.Millisecond)
					}
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			_ = tp.WaitStats(func(m map[int]testpmd.PortStats) bool { return m[0].RxPackets >= frames }, 5*time.Second)
			// testpmd's port statistics count what its PMD took from the
			// ring; its forward statistics can lag behind them at "stop".
			time.Sleep(500 * time.Millisecond)
			got := tp.Stats()[0].RxPackets
			st := d.stats(t)
			t.Logf("virtio-user received %d; switch: nic0 rx %d, vu tx %d drops %v", got, port(st, "nic0").RxPackets, port(st, "vu").TxPackets, port(st, "vu").Drops)
			// On a loaded 2-core machine testpmd may be off-CPU long enough
			// for its ring to fill: those frames must be counted as drops,
			// and everything else must have arrived.
			vu := port(st, "vu")
			if got != vu.TxPackets || vu.TxPackets+vu.Drops["no_rx_buffers"] != frames || got < frames/2 {
				t.Errorf("the namespace sent %d frames: virtio-user received %d, the switch sent %d and dropped %v", frames, got, vu.TxPackets, vu.Drops)
			}
			checkBalance(t, st)
		})
	}
}
