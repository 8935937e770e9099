package main

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/xvswitch/xvswitch/ctl"
	"github.com/xvswitch/xvswitch/test/netns"
	"github.com/xvswitch/xvswitch/test/qemu"
	"github.com/xvswitch/xvswitch/test/require"
)

// TestOwnedQueueVM: a QEMU guest that owns queue 1 of a 2-queue veth NIC
// (own=), with the namespace's frames to its MAC steered to queue 1 and
// everything else to queue 0 (a tcx program on the sending end), pings
// and moves 2 MB of TCP each way (sha256 checked). Its frames from the
// NIC arrive through its own socket on a UMEM over its memory, written by
// the kernel straight into its RX buffers (zero-copy); the counters say
// so, and nothing for it was passed to the kernel on its queue. A second guest on the copy path works beside it
// (the namespace resolves both by broadcast ARP and pings both), and
// frames for the second guest sent onto queue 1 are passed to the
// kernel, never redirected to the owner's socket. The owner's port has
// spoof=allow (a port enforcing its source MAC copies what it sends) and
// offloads=off (Linux then sends linear frames, one descriptor each, with
// no checksum request), so its frames to the NIC leave from its own
// memory too: the NIC port counts them zero-copy.
func TestOwnedQueueVM(t *testing.T) {
	require.Root(t)
	require.Long(t)
	require.Commands(t, "qemu-system-x86_64", "ping")
	qemu.EnsureGuest(t)
	const (
		host, guest = "10.95.0.1", "10.95.0.2"
		mac         = "52:54:00:95:00:02"
		xfer        = 2 << 20
	)
	v := netns.NewVeth(t, netns.VethOptions{Queues: 2, InnerAddr: host + "/24", KeepOffload: true})
	const guest2, mac2 = "10.95.0.3", "52:54:00:95:00:03"
	steer := v.SteerQueues(t, map[string]int{mac: 1}, 0)
	sock := filepath.Join(t.TempDir(), "vmq.sock")
	sock2 := filepath.Join(t.TempDir(), "vmc.sock")
	d := startDaemon(t, "--nic", v.Outer+",mode=copy,name=nic0", "--vhost", sock+",mac="+mac+",own="+v.Outer+":1,name=vmq,spoof=allow,offloads=off",
		"--vhost", sock2+",mac="+mac2+",name=vmc")
	if out := d.cli(t, "show", "ports"); !strings.Contains(out, "owned=1=vmq") || !strings.Contains(out, "own="+v.Outer+":1") {
		t.Errorf("show ports does not say who owns queue 1:\n%s", out)
	}
	cfg := qemu.GuestConfig{
		NICs: []qemu.GuestNIC{{Socket: sock, MAC: mac, Packed: true, Addr: guest + "/24"}},
		Commands: []qemu.GuestCommand{
			qemu.GuestTCPReceive("from-host", "", tcpToGuest, xfer),
			qemu.GuestTCPSend("to-host", "", host, tcpToHost, xfer),
		},
		Timeout: 150 * time.Second,
	}
	cfg.Commands[0].Timeout = 60 * time.Second
	cfg.Commands[1].Timeout = 60 * time.Second
	g := qemu.StartGuest(t, cfg)
	g2 := qemu.StartGuest(t, qemu.GuestConfig{
		NICs: []qemu.GuestNIC{{Socket: sock2, MAC: mac2, Packed: false, Addr: guest2 + "/24"}},
		Commands: []qemu.GuestCommand{
			qemu.GuestPing("ping-host", "", host, 5, 0),
			qemu.GuestTCPReceive("hold", "", idlePort, 1), // up until the test is done with it
		},
		Timeout: 150 * time.Second,
	})
	got := tcpSink(t, v, host, tcpToHost)
	if !g.WaitReady("from-host", 90*time.Second) {
		t.Fatalf("the guest never got ready:\n%s", g.Wait().Console)
	}
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(d.cli(t, "show", "ports"), "own_sockets=bound"); {
		if time.Now().After(deadline) {
			t.Fatalf("the owner's sockets were never bound:\n%s", d.cli(t, "show", "ports"))
		}
		time.Sleep(50 * time.Millisecond)
	}
	if out, err := v.NS.Exec("ping", "-c", "5", "-i", "0.2", "-W", "3", guest).CombinedOutput(); err != nil {
		t.Errorf("ping the owning guest: %v\n%s", err, out)
	}
	if !g2.WaitReady("hold", 90*time.Second) {
		t.Errorf("the second guest never got ready")
	}
	if out, err := v.NS.Exec("ping", "-c", "3", "-i", "0.2", "-W", "3", guest2).CombinedOutput(); err != nil {
		t.Errorf("ping the guest on the copy path: %v\n%s", err, out)
	}
	// Frames for the second guest put on the owner's queue: passed to the
	// kernel and counted, never redirected into the owner's memory.
	before := d.stats(t)[0].Kernel["xdp_owned_queue_passed"]
	steer.Set(mac2, 1)
	_ = v.NS.Exec("ping", "-c", "3", "-i", "0.2", "-W", "1", guest2).Run()
	steer.Set(mac2, 0)
	// The 3 echo requests, and any unicast ARP probe the namespace sent
	// to the unanswering guest meanwhile.
	misSteered := d.stats(t)[0].Kernel["xdp_owned_queue_passed"] - before
	if misSteered < 3 || misSteered > 5 {
		t.Errorf("frames for the second guest on the owned queue: %d counted as owned_queue_passed, want the 3 echo requests (and an ARP probe or two)", misSteered)
	}
	_ = v.NS.Do(func() error {
		c, err := net.DialTimeout("tcp4", fmt.Sprintf("%s:%d", guest2, idlePort), 10*time.Second)
		if err == nil {
			c.Write([]byte{1})
			c.Close()
		}
		return err
	})
	payload := make([]byte, xfer)
	rand.Read(payload)
	sum := sha256.Sum256(payload)
	if err := v.NS.Do(func() error {
		c, err := net.DialTimeout("tcp4", fmt.Sprintf("%s:%d", guest, tcpToGuest), 10*time.Second)
		if err != nil {
			return err
		}
		defer c.Close()
		_, err = c.Write(payload)
		return err
	}); err != nil {
		t.Errorf("TCP to the guest: %v", err)
	}
	var fromGuest string
	select {
	case fromGuest = <-got:
	case <-time.After(90 * time.Second):
		t.Errorf("no TCP stream from the guest")
	}
	res := g.Wait()
	res.RequireOK(t, qemu.GuestConfig{})
	if r := res.Result("from-host"); r.SHA256 != hex.EncodeToString(sum[:]) {
		t.Errorf("host -> guest: guest got sha256 %s (%d bytes)", r.SHA256, r.Bytes)
	}
	if up := res.Result("to-host"); !strings.HasPrefix(fromGuest, up.SentSHA256+"/") {
		t.Errorf("guest -> host: host got %s, guest sent %s", fromGuest, up.SentSHA256)
	}
	res2 := g2.Wait()
	if r := res2.Result("ping-host"); !r.OK {
		t.Errorf("the second guest's pings to the namespace: %+v", r)
	}
	time.Sleep(300 * time.Millisecond)
	t.Logf("xvswitch show stats:\n%s", d.cli(t, "show", "stats"))
	st := d.stats(t)
	var vmq, vmc, nic ctl.PortCounters
	for _, p := range st {
		switch p.Name {
		case "nic0":
			nic = p
			// The guest's frames came in on its queue, through its socket.
			if len(p.Queues) < 2 || p.Queues[1].RxPackets < xfer/1500 {
				t.Errorf("nic0 queue 1 (owned) received too little: %+v", p.Queues)
			}
			if n := p.Kernel["xdp_owned_queue_passed"]; n != misSteered {
				t.Errorf("%d frames not for the owner arrived on its queue, want only the %d sent there", n, misSteered)
			}
		case "vmq":
			vmq = p
		case "vmc":
			vmc = p
		}
	}
	// NIC -> vmq: the frames on its queue landed in its own buffers
	// (zero-copy); through the switch, copied, came only group frames:
	// the namespace's broadcasts (ARP requests, passed to the kernel by
	// the XDP program and read from the NIC's AF_PACKET socket) and what
	// the other guest flooded. xvswitch copied nothing else into it.
	nicGroups := st[0].Kernel["xdp_group_passed"]
	if vmq.ZerocopyFrames < xfer/1500 || vmq.ZerocopyFrames+vmq.CopiedFrames != vmq.TxPackets {
		t.Errorf("vmq path counters %+v, tx %d: want the 2 MB stream's frames zero-copy", vmq.PathCounters, vmq.TxPackets)
	}
	if vmq.CopiedFrames > nicGroups+vmc.RxPackets {
		t.Errorf("vmq: %d frames copied, more than the group frames that go through the switch (%d from the NIC, %d from vmc at most)",
			vmq.CopiedFrames, nicGroups, vmc.RxPackets)
	}
	t.Logf("vmq: %d frames zero-copy, %d copied (%d bytes); group frames passed on the NIC %d", vmq.ZerocopyFrames, vmq.CopiedFrames, vmq.CopiedBytes, nicGroups)
	// vmq -> NIC: everything it sent (the 2 MB stream, its ACKs, pings,
	// ARP) left from its own memory; the NIC's queues copied only what
	// vmc sent.
	var vmqDrops uint64
	for _, n := range vmq.Drops {
		vmqDrops += n
	}
	if nic.ZerocopyFrames < xfer/1500 || nic.ZerocopyFrames < vmq.RxPackets-vmqDrops-vmq.FloodCopies {
		t.Errorf("nic0 path counters %+v: want vmq's %d frames (%d dropped) zero-copy", nic.PathCounters, vmq.RxPackets, vmqDrops)
	}
	if nic.CopiedFrames > vmc.RxPackets {
		t.Errorf("nic0: %d frames copied, more than the %d vmc sent: some of vmq's were copied", nic.CopiedFrames, vmc.RxPackets)
	}
	t.Logf("nic0 (vmq -> NIC): %d frames zero-copy, %d copied (%d bytes; vmc sent %d)", nic.ZerocopyFrames, nic.CopiedFrames, nic.CopiedBytes, vmc.RxPackets)
	checkBalance(t, st)
	for _, l := range strings.Split(d.log.String(), "\n") { // the owner sockets' timeline
		if strings.Contains(l, "owned NIC queues") || strings.Contains(l, "memory cannot back") {
			t.Log(l)
		}
	}
	if err := d.stop(t); err != nil {
		t.Errorf("xvswitch exited with %v\n%s", err, d.log)
	}
}
