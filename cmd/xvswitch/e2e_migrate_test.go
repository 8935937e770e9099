package main

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"path/filepath"
	"regexp"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/xvswitch/xvswitch/ctl"
	"github.com/xvswitch/xvswitch/test/netns"
	"github.com/xvswitch/xvswitch/test/qemu"
	"github.com/xvswitch/xvswitch/test/require"
)

// Live migration on one host, through one xvswitch:
//
//	namespace (10.98.0.1) -- veth -- [nic0: XDP + AF_XDP]   xvswitch
//	    [vm-src socket] -- source QEMU ==migration==> target QEMU -- [vm-dst socket]
//
// The namespace streams TCP into the guest and pings it 5 times a second
// while the guest moves from the source QEMU to the target (same host,
// -incoming, driven over QMP). The stream must arrive whole (sha256), at
// most 2 s of pings may go unanswered, and afterwards the switch's FDB has
// the guest's MAC behind vm-dst.
const (
	migPeerAddr  = "10.98.0.1"
	migGuestAddr = "10.98.0.2"
	migGuestMAC  = "52:54:00:98:00:02"
	migPort      = 5101
	migBytes     = 6 << 20
	// migRate paces the stream (bytes a second), so that it runs from
	// before the migration to after it rather than finishing first.
	migRate = 1 << 20
	// migMemoryKB is the guest's RAM: 256 MiB less 8 KiB. QEMU 7.2's TCG
	// loses dirty pages of the guest's own writes when its RAM block is
	// a multiple of 256 KiB (docs/vms.md, "Live migration"); QEMU rounds
	// RAM up to 8 KiB.
	migMemoryKB = 256<<10 - 8
)

// migSwitchArgs are xvswitch's options: the NIC and one vhost port per
// QEMU, without mac= (a configured MAC is a static FDB entry of its
// port, which could not move to the other).
func migSwitchArgs(nic, srcSock, dstSock string) []string {
	return []string{"--nic", nic + ",mode=copy,name=nic0",
		"--vhost", srcSock + ",name=vm-src", "--vhost", dstSock + ",name=vm-dst"}
}

// migGuest is the migrating guest with its NIC on sock: the source's and,
// with the target's socket, the target's (StartIncoming adds -incoming).
func migGuest(sock string, packed bool) qemu.GuestConfig {
	cfg := qemu.GuestConfig{
		NICs: []qemu.GuestNIC{{Socket: sock, MAC: migGuestMAC, Addr: migGuestAddr + "/24", Packed: packed}},
		Commands: []qemu.GuestCommand{
			// The guest answers GUEST_ANNOUNCE with gratuitous ARP only
			// with arp_notify (Linux's default is off).
			qemu.GuestShell("arp-notify", "", "echo 1 > /proc/sys/net/ipv4/conf/all/arp_notify"),
			qemu.GuestTCPReceive("stream", "", migPort, migBytes),
			qemu.GuestShell("linger", "", "sleep 2"),
		},
		MemoryKB: migMemoryKB,
		Monitor:  true,
		Timeout:  85 * time.Second,
	}
	cfg.Commands[1].Timeout = 60 * time.Second
	return cfg
}

func TestLiveMigration(t *testing.T) {
	require.Root(t)
	require.Long(t)
	require.Commands(t, "qemu-system-x86_64", "ping")
	qemu.EnsureGuest(t)
	for _, packed := range []bool{false, true} {
		t.Run(ringName(packed), func(t *testing.T) { testLiveMigration(t, packed) })
	}
}

func testLiveMigration(t *testing.T, packed bool) {
	v := netns.NewVeth(t, netns.VethOptions{InnerAddr: migPeerAddr + "/24", KeepOffload: true})
	dir := t.TempDir()
	srcSock, dstSock := filepath.Join(dir, "src.sock"), filepath.Join(dir, "dst.sock")
	d := startDaemon(t, migSwitchArgs(v.Outer, srcSock, dstSock)...)

	cfg := migGuest(srcSock, packed)
	src := qemu.StartGuest(t, cfg)
	if !src.WaitReady("stream", 60*time.Second) {
		t.Fatalf("the guest never got ready:\n%s", src.Wait().Console)
	}
	uri := "unix:" + filepath.Join(dir, "migrate.sock")
	dst := qemu.StartIncoming(t, src, migGuest(dstSock, packed), uri)

	// Pings, 5 a second, from before the migration to after it.
	ping := v.NS.Exec("ping", "-i", "0.2", "-W", "1", migGuestAddr)
	var pingOut bytes.Buffer // read only after Wait
	ping.Stdout, ping.Stderr = &pingOut, &pingOut
	if err := ping.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ping.Process.Kill(); _ = ping.Wait() }()

	payload := make([]byte, migBytes)
	rand.Read(payload)
	sum := sha256.Sum256(payload)
	sent := make(chan int, 1)
	streamErr := make(chan error, 1)
	go func() {
		streamErr <- v.NS.Do(func() error {
			c, err := net.DialTimeout("tcp4", fmt.Sprintf("%s:%d", migGuestAddr, migPort), 10*time.Second)
			if err != nil {
				return err
			}
			defer c.Close()
			const chunk = 64 << 10
			start := time.Now()
			for off := 0; off < len(payload); off += chunk {
				if off == len(payload)/4 {
					sent <- off
				}
				// Pace: chunk k leaves no earlier than k*chunk/migRate.
				if wait := time.Duration(off) * time.Second / migRate; time.Since(start) < wait {
					time.Sleep(wait - time.Since(start))
				}
				_ = c.SetWriteDeadline(time.Now().Add(30 * time.Second))
				if _, err := c.Write(payload[off:min(off+chunk, len(payload))]); err != nil {
					return fmt.Errorf("after %d bytes: %w", off, err)
				}
			}
			return nil
		})
	}()
	select {
	case n := <-sent:
		t.Logf("%d bytes of the stream sent: migrating", n)
	case err := <-streamErr:
		t.Fatalf("the stream ended before the migration: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("the stream did not get going")
	}
	began := time.Now()
	m, err := qemu.Migrate(src, uri, 45*time.Second)
	took := time.Since(began)
	if err != nil {
		t.Fatalf("migration: %v (%+v)", err, m)
	}
	t.Logf("migration completed in %v: total %d ms, downtime %d ms, setup %d ms, %d MiB transferred, %d dirty syncs",
		took, m.TotalTime, m.Downtime, m.SetupTime, m.RAM.Transferred>>20, m.RAM.DirtySync)
	src.Stop() // the paused source, as libvirt ends it
	if err := <-streamErr; err != nil {
		t.Errorf("the stream: %v", err)
	}
	run := qemu.MigratedRun(src, dst)
	_ = ping.Process.Signal(syscall.SIGINT)
	_ = ping.Wait()
	out := pingOut.String()
	tx, rx := pingCounts(out)
	t.Logf("ping: %d sent, %d answered: %s", tx, rx, lastLines(out, 2))
	if tx < 10 || tx-rx > 10 {
		t.Errorf("pings: %d sent, %d lost: more than 2 s worth at 5 a second", tx, tx-rx)
	}
	if got := run.Result("stream"); !got.OK || got.SHA256 != hex.EncodeToString(sum[:]) {
		t.Errorf("the stream into the guest: %s, sha256 %s (%d bytes), want %x", got.Detail, got.SHA256, got.Bytes, sum)
	}
	if !run.Completed {
		t.Errorf("the guest did not finish its script on the target:\n%s", run.Reports)
	}
	var fdb []ctl.FDBRow
	if err := json.Unmarshal([]byte(d.cli(t, "show", "fdb", "--json")), &fdb); err != nil {
		t.Fatal(err)
	}
	port := ""
	for _, r := range fdb {
		if r.MAC == migGuestMAC {
			port = r.Port
		}
	}
	if port != "vm-dst" {
		t.Errorf("the guest's MAC is behind %q, want vm-dst:\n%s", port, d.cli(t, "show", "fdb"))
	}
	t.Logf("xvswitch show fdb:\n%s", d.cli(t, "show", "fdb"))
	t.Logf("xvswitch show stats:\n%s", d.cli(t, "show", "stats"))
	time.Sleep(300 * time.Millisecond)
	checkBalance(t, d.stats(t))
	if err := d.stop(t); err != nil {
		t.Errorf("xvswitch exited with %v", err)
	}
	// The source's device logged while the guest moved.
	log := d.log.String()
	if !regexp.MustCompile(`vhost dirty log set.*port=vm-src`).MatchString(log) {
		t.Errorf("vm-src never got a dirty log:\n%s", log)
	}
	for _, l := range regexp.MustCompile(`(?m)^.*port=vm-(src|dst).*$`).FindAllString(log, -1) {
		t.Log(l)
	}
}

var pingSummary = regexp.MustCompile(`(\d+) packets transmitted, (\d+) (?:packets )?received`)

func pingCounts(out string) (tx, rx int) {
	m := pingSummary.FindStringSubmatch(out)
	if m == nil {
		return 0, 0
	}
	tx, _ = strconv.Atoi(m[1])
	rx, _ = strconv.Atoi(m[2])
	return tx, rx
}
