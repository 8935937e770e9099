package main

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/xvswitch/xvswitch/test/qemu"
	"github.com/xvswitch/xvswitch/test/require"
)

// The QEMU topology of docs/vms.md: two guests on one xvswitch, one per
// socket mode, pinging and streaming to each other through it while the
// switch restarts under them.
//
//	vm1 (10.97.0.1): QEMU listens (server=on), xvswitch connects (client);
//	    2 queue pairs, 2 vCPUs, memfd RAM
//	vm2 (10.97.0.2): xvswitch listens, QEMU connects and reconnects
//	    (reconnect=1); 2 MiB huge pages
const (
	qVM1Addr = "10.97.0.1"
	qVM2Addr = "10.97.0.2"
	qVM1MAC  = "52:54:00:97:00:01"
	qVM2MAC  = "52:54:00:97:00:02"
)

// qSwitchPorts are xvswitch's two vhost ports: a client of vm1's QEMU,
// and a server for vm2's.
func qSwitchPorts(vm1Sock, vm2Sock string) []string {
	return []string{
		"--vhost", vm1Sock + ",client,queues=2,mac=" + qVM1MAC + ",name=vm1",
		"--vhost", vm2Sock + ",mac=" + qVM2MAC + ",name=vm2",
	}
}

// qNICs are the guests' NICs as QEMU sees them (the command lines of
// docs/vms.md are built from these).
func qNICs(vm1Sock, vm2Sock string) (vm1, vm2 qemu.GuestNIC) {
	vm1 = qemu.GuestNIC{Socket: vm1Sock, Server: true, Queues: 2, MAC: qVM1MAC, Addr: qVM1Addr + "/24"}
	vm2 = qemu.GuestNIC{Socket: vm2Sock, Reconnect: 1, MAC: qVM2MAC, Addr: qVM2Addr + "/24"}
	return vm1, vm2
}

// reachScript waits until peer answers (the other guest has booted).
func reachScript(peer string) string {
	return "until ping -c 1 -W 1 " + peer + " >/dev/null 2>&1; do sleep 0.2; done"
}

// qGuests are the two guests' runs.
func qGuests(vm1Sock, vm2Sock string) (vm1, vm2 qemu.GuestConfig) {
	n1, n2 := qNICs(vm1Sock, vm2Sock)
	vm1 = qemu.GuestConfig{
		NICs: []qemu.GuestNIC{n1},
		Commands: []qemu.GuestCommand{
			qemu.GuestShell("reach", "", reachScript(qVM2Addr)),
			qemu.GuestPing("ping", "", qVM2Addr, 5, 56),
			qemu.GuestOutage("restart", "", qVM2Addr, 3),
			qemu.GuestTCPSend("tcp", "", qVM2Addr, 5001, 256*1024),
			qemu.GuestShell("queues", "", "ls /sys/class/net/eth0/queues"),
		},
		Timeout: 180 * time.Second,
	}
	vm2 = qemu.GuestConfig{
		NICs:      []qemu.GuestNIC{n2},
		HugePages: true,
		Commands: []qemu.GuestCommand{
			qemu.GuestShell("reach", "", reachScript(qVM1Addr)),
			qemu.GuestPing("ping", "", qVM1Addr, 5, 56),
			qemu.GuestTCPReceive("tcp", "", 5001, 256*1024),
		},
		Timeout: 180 * time.Second,
	}
	for _, c := range []*qemu.GuestConfig{&vm1, &vm2} {
		c.Commands[0].Timeout = 120 * time.Second
	}
	vm1.Commands[3].Timeout = 60 * time.Second
	vm2.Commands[2].Timeout = 150 * time.Second
	return vm1, vm2
}

// TestVMsQEMU boots the two guests of docs/vms.md's QEMU command lines on
// xvswitch, restarts xvswitch once they reach each other, and requires
// that both links come back by themselves (vm1's because xvswitch
// reconnects to QEMU's socket, vm2's because QEMU reconnects to the new
// one), that every ping before and the TCP stream after the restart
// arrived, that vm1 has two queue pairs, and that the restarted switch's
// counters balance.
func TestVMsQEMU(t *testing.T) {
	require.Long(t)
	require.Root(t)
	require.Commands(t, "qemu-system-x86_64")
	qemu.EnsureGuest(t)
	dir := t.TempDir()
	vm1Sock, vm2Sock := filepath.Join(dir, "vm1.sock"), filepath.Join(dir, "vm2.sock")
	c1, c2 := qGuests(vm1Sock, vm2Sock)
	qemu.ReserveHugePages(t, 128) // vm2's 256 MiB

	// The guests first: vm1's QEMU listens without waiting (wait=off),
	// vm2's retries until xvswitch serves its socket.
	g1, g2 := qemu.StartGuest(t, c1), qemu.StartGuest(t, c2)
	args := qSwitchPorts(vm1Sock, vm2Sock)
	d := startDaemon(t, args...)
	waitPortsReady(t, d, 120*time.Second, "vm1", "vm2")
	t.Logf("xvswitch show ports:\n%s", d.cli(t, "show", "ports"))
	if n := qemu.HugePagesTaken(t); n < 128 {
		t.Errorf("vm2 runs, but only %d huge pages are taken: its RAM is not on them", n)
	}

	if !g1.WaitReady("restart", 150*time.Second) {
		t.Fatalf("vm1 never reached its restart step:\n%s", g1.Wait().Reports)
	}
	// vm2 pings vm1 at the same time as vm1 pings vm2, and may still be
	// at it when vm1 is ready: its TCP receiver listens once its pings
	// are done (vm1's restart step keeps pinging until the outage).
	if !g2.WaitReady("tcp", 150*time.Second) {
		t.Fatalf("vm2 never reached its tcp step:\n%s", g2.Wait().Reports)
	}
	t.Logf("the guests reach each other: restarting xvswitch")
	if err := d.stop(t); err != nil {
		t.Errorf("xvswitch exited with %v", err)
	}
	time.Sleep(time.Second)
	d = startDaemon(t, args...)
	waitPortsReady(t, d, 30*time.Second, "vm1", "vm2")
	t.Logf("xvswitch show ports after the restart:\n%s", d.cli(t, "show", "ports"))

	r1, r2 := g1.Wait(), g2.Wait()
	r1.RequireOK(t, c1)
	r2.RequireOK(t, c2)
	t.Logf("vm1 %v, vm2 %v wall; vm1: %s; ping: %s", r1.Duration.Round(time.Millisecond), r2.Duration.Round(time.Millisecond),
		strings.Join(r1.Result("restart").Output, " "), lastLines(strings.Join(r1.Result("ping").Output, "\n"), 2))
	if got, sent := r2.Result("tcp"), r1.Result("tcp"); got.SHA256 != sent.SentSHA256 {
		t.Errorf("vm1 -> vm2 after the restart: vm2 got %d bytes sha256 %s, vm1 sent %s", got.Bytes, got.SHA256, sent.SentSHA256)
	}
	const virtioNetFMQ = 22
	if q := strings.Join(r1.Result("queues").Output, " "); !r1.HasFeature(0, virtioNetFMQ) || !strings.Contains(q, "rx-1") {
		t.Errorf("vm1 should have negotiated MQ and have two queue pairs: %q, features %s", q, r1.NIC(0).Features)
	}
	time.Sleep(300 * time.Millisecond)
	t.Logf("xvswitch show stats (since the restart):\n%s", d.cli(t, "show", "stats"))
	st := d.stats(t)
	checkBalance(t, st)
	for _, name := range []string{"vm1", "vm2"} {
		if p := port(st, name); p.RxPackets < 3 || p.TxPackets < 3 {
			t.Errorf("port %s after the restart: rx %d tx %d, want at least the 3 pings each way", name, p.RxPackets, p.TxPackets)
		}
	}
}
