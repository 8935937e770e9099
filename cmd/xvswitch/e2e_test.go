package main

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/xvswitch/xvswitch/ctl"
	"github.com/xvswitch/xvswitch/test/netns"
	"github.com/xvswitch/xvswitch/test/qemu"
	"github.com/xvswitch/xvswitch/test/require"
)

// The NIC <-> VM topology of the end-to-end tests (test/cmd/demo, make
// demo, builds the same with xvswitch in client mode):
//
//	namespace "host" (10.93.0.1) -- veth -- [outer end: XDP + AF_XDP]
//	    xvswitch (learning bridge)
//	[vhost-user socket] -- QEMU guest eth0 (10.93.0.2)
//
// The outer end also carries an address of the host's own (10.93.1.1),
// which the steering program must leave to the kernel.
const (
	hostAddr   = "10.93.0.1"
	guestAddr  = "10.93.0.2"
	ownAddr    = "10.93.1.1" // the host's address on the NIC
	ownPeer    = "10.93.1.2" // the namespace's address towards it
	guestMAC   = "52:54:00:93:00:02"
	tcpToGuest = 5001
	tcpToHost  = 5002
	idlePort   = 5003
)

// nicVMRun is what one run of the NIC <-> VM topology observed.
type nicVMRun struct {
	guest      *qemu.GuestRun
	stats      []ctl.PortCounters
	idleCPU    float64 // fraction of one core over the idle window
	pingOut    string
	toGuestSHA string
	fromGuest  string // sha256 of what the host received
}

// runNICVM brings up the topology, moves traffic both ways, measures idle
// CPU, and tears it down; logf narrates.
func runNICVM(t *testing.T, packed bool, xfer int, logf func(string, ...any)) *nicVMRun {
	require.Root(t)
	require.Commands(t, "qemu-system-x86_64", "ping")
	qemu.EnsureGuest(t)
	r := &nicVMRun{}

	// The namespace's end keeps its offloads at their defaults, as a
	// container's does: TCP it sends carries partial checksums, which the
	// NIC port completes (docs/afxdp-veth.md).
	logf("creating a namespace with a veth pair (default offloads): its outer end plays the NIC")
	v := netns.NewVeth(t, netns.VethOptions{InnerAddr: hostAddr + "/24", OuterAddr: ownAddr + "/24", KeepOffload: true})
	v.NS.MustRun(t, "ip", "addr", "add", ownPeer+"/24", "dev", v.Inner)

	sock := filepath.Join(t.TempDir(), "vm0.sock")
	logf("starting xvswitch: --nic %s --vhost %s", v.Outer, sock)
	d := startDaemon(t, "--nic", v.Outer+",mode=copy,name=nic0", "--vhost", sock+",mac="+guestMAC+",name=vm0")
	logf("ports:\n%s", d.cli(t, "show", "ports"))

	logf("booting a QEMU guest (TCG) with one virtio-net NIC on %s, packed=%v", sock, packed)
	cfg := qemu.GuestConfig{
		NICs: []qemu.GuestNIC{{Socket: sock, MAC: guestMAC, Packed: packed, Addr: guestAddr + "/24"}},
		Commands: []qemu.GuestCommand{
			qemu.GuestTCPReceive("from-host", "", tcpToGuest, xfer),
			qemu.GuestTCPSend("to-host", "", hostAddr, tcpToHost, xfer),
			qemu.GuestTCPReceive("idle", "", idlePort, 1),
		},
		Timeout: 150 * time.Second,
	}
	cfg.Commands[0].Timeout = 60 * time.Second
	cfg.Commands[1].Timeout = 60 * time.Second
	cfg.Commands[2].Timeout = 40 * time.Second
	g := qemu.StartGuest(t, cfg)

	// The host's side of the guest's upload listens before the guest dials.
	got := tcpSink(t, v, hostAddr, tcpToHost)

	if !g.WaitReady("from-host", 90*time.Second) {
		t.Fatalf("the guest never got ready:\n%s", g.Wait().Console)
	}
	logf("guest is up; pinging it from the namespace")
	out, err := v.NS.Exec("ping", "-c", "5", "-i", "0.2", "-W", "3", guestAddr).CombinedOutput()
	r.pingOut = string(out)
	if err != nil {
		t.Errorf("ping from the namespace to the guest: %v\n%s", err, out)
	}
	logf("%s", lastLines(string(out), 2))

	logf("sending %d bytes over TCP to the guest, and receiving %d from it", xfer, xfer)
	payload := make([]byte, xfer)
	rand.Read(payload)
	sum := sha256.Sum256(payload)
	r.toGuestSHA = hex.EncodeToString(sum[:])
	if err := v.NS.Do(func() error {
		c, err := net.DialTimeout("tcp4", fmt.Sprintf("%s:%d", guestAddr, tcpToGuest), 10*time.Second)
		if err != nil {
			return err
		}
		defer c.Close()
		_, err = c.Write(payload)
		return err
	}); err != nil {
		t.Errorf("TCP to the guest: %v", err)
	}
	select {
	case r.fromGuest = <-got:
	case <-time.After(90 * time.Second):
		t.Errorf("no TCP stream from the guest")
	}

	if g.WaitReady("idle", 60*time.Second) {
		logf("guest connected and quiet: measuring xvswitch's CPU for 5 s")
		before, t0 := d.cpuTicks(t), time.Now()
		time.Sleep(5 * time.Second)
		ticks := d.cpuTicks(t) - before
		r.idleCPU = float64(ticks) / 100 / time.Since(t0).Seconds() // USER_HZ is 100 on Linux
		logf("idle CPU: %.1f%% of one core", 100*r.idleCPU)
		_ = v.NS.Do(func() error {
			c, err := net.DialTimeout("tcp4", fmt.Sprintf("%s:%d", guestAddr, idlePort), 10*time.Second)
			if err == nil {
				c.Write([]byte{1})
				c.Close()
			}
			return err
		})
	} else {
		t.Errorf("the guest never reached its idle step")
	}
	r.guest = g.Wait()

	logf("the host's own address on the NIC still answers while xvswitch runs")
	if out, err := v.NS.Exec("ping", "-c", "3", "-i", "0.2", "-W", "3", ownAddr).CombinedOutput(); err != nil {
		t.Errorf("the host's own address %s stopped answering: %v\n%s", ownAddr, err, out)
	}
	time.Sleep(300 * time.Millisecond) // let the last bursts' counters settle
	logf("xvswitch show stats:\n%s", d.cli(t, "show", "stats"))
	logf("xvswitch show fdb:\n%s", d.cli(t, "show", "fdb"))
	r.stats = d.stats(t)

	logf("stopping xvswitch (SIGTERM)")
	if err := d.stop(t); err != nil {
		t.Errorf("xvswitch exited with %v\n%s", err, d.log)
	}
	for _, p := range []string{sock, d.ctl, "/sys/fs/bpf/xvswitch/" + v.Outer} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s left behind after shutdown", p)
		}
	}
	if out, _ := exec.Command("ip", "link", "show", v.Outer).CombinedOutput(); bytes.Contains(out, []byte("xdp")) {
		t.Errorf("XDP still attached after shutdown:\n%s", out)
	}
	return r
}

func lastLines(s string, n int) string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, "\n")
}

// TestNICToVM is the end-to-end test of the NIC <-> VM path, both rings.
func TestNICToVM(t *testing.T) {
	for _, packed := range []bool{true, false} {
		t.Run(ringName(packed), func(t *testing.T) {
			r := runNICVM(t, packed, 2<<20, t.Logf)
			if r.guest == nil {
				return
			}
			r.guest.RequireOK(t, qemu.GuestConfig{})
			if !strings.Contains(r.pingOut, "5 received") {
				t.Errorf("pings lost: %s", r.pingOut)
			}
			if got := r.guest.Result("from-host"); got.SHA256 != r.toGuestSHA {
				t.Errorf("host -> guest: guest got sha256 %s (%d bytes), sent %s", got.SHA256, got.Bytes, r.toGuestSHA)
			}
			if up := r.guest.Result("to-host"); !strings.HasPrefix(r.fromGuest, up.SentSHA256+"/") {
				t.Errorf("guest -> host: host got %s, guest sent %s", r.fromGuest, up.SentSHA256)
			}
			if r.guest.HasFeature(0, qemu.VirtioFRingPacked) != packed {
				t.Errorf("ring kind: packed negotiated %v, want %v", !packed, packed)
			}
			// The namespace's TCP came with partial checksums, which the
			// NIC port completed (or the streams above would have failed).
			for _, p := range r.stats {
				if p.Name == "nic0" && p.Kernel["csum_completed"] == 0 {
					t.Errorf("nic0 completed no checksums: kernel counters %v", p.Kernel)
				}
			}
			checkBalance(t, r.stats)
			if r.idleCPU > 0.05 {
				t.Errorf("idle xvswitch used %.1f%% of a core (want < 5%%)", 100*r.idleCPU)
			}
		})
	}
}

// tcpSink listens on addr:port in v's namespace (before the guest dials)
// for one TCP stream and sends "sha256/bytes/error" of what it read.
func tcpSink(t *testing.T, v *netns.Veth, addr string, port int) <-chan string {
	t.Helper()
	var ln net.Listener
	if err := v.NS.Do(func() (err error) { ln, err = net.Listen("tcp4", fmt.Sprintf("%s:%d", addr, port)); return }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	got := make(chan string, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- "accept: " + err.Error()
			return
		}
		defer c.Close()
		h := sha256.New()
		n, err := io.Copy(h, c)
		got <- fmt.Sprintf("%x/%d/%v", h.Sum(nil), n, err)
	}()
	return got
}
