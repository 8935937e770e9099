package qemu

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/xvswitch/xvswitch/test/require"
)

// TestGuestSelfTest boots the guest with no vhost-user back-end at all: its
// first two NICs are wired to each other by a QEMU hub (-netdev hubport),
// eth1 sits in its own namespace inside the guest, and the guest pings and
// sends a TCP stream from eth0's stack to eth1's address. That can only
// work across the wire (the namespaces share no loopback). A third NIC on
// QEMU's user-mode network (in a third namespace) carries TCP to and from
// peers in this test process. Together they prove the image, the init
// script, namespaces, ping, nc, the checksums, the feature report and the
// result plumbing: everything but vhost-user itself.
func TestGuestSelfTest(t *testing.T) {
	require.Long(t)
	// Host peers, reached over the user-mode NIC: one the guest connects
	// to (10.0.2.2 is the host's loopback), one that connects to the guest
	// through a forwarded port.
	sink, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	sinkPort := sink.Addr().(*net.TCPAddr).Port
	fwdPort := freePort(t)
	cfg := GuestConfig{
		NICs: []GuestNIC{
			{Netdev: "hubport,hubid=0", Addr: "10.99.0.1/24", Packed: true, MTU: 9000},
			{Netdev: "hubport,hubid=0", Addr: "10.99.0.2/24", Netns: "peer", MTU: 9000},
			{Netdev: fmt.Sprintf("user,hostfwd=tcp:127.0.0.1:%d-:5003", fwdPort),
				Addr: "10.0.2.15/24", Netns: "slirp"},
		},
		Commands: []GuestCommand{
			GuestPing("ping", "", "10.99.0.2", 3, 56),
			GuestPing("ping-jumbo", "", "10.99.0.2", 2, 8000),
			GuestTCP("tcp", "peer", "10.99.0.2", "", 5001, 300000),
			GuestShell("eth0-tx", "", "cat /sys/class/net/eth0/statistics/tx_packets"),
			GuestShell("peer-sees-one-nic", "peer", "ip -o link show | grep -v ' lo:' | wc -l"),
			GuestShell("ipv6-off", "peer", "cat /proc/sys/net/ipv6/conf/eth1/disable_ipv6 /proc/sys/net/ipv6/conf/default/disable_ipv6"),
			GuestShell("ipv6-off-root", "", "cat /proc/sys/net/ipv6/conf/eth0/disable_ipv6"),
			GuestTCPReceive("from-host", "slirp", 5003, 100000),
			GuestTCPSend("to-host", "slirp", "10.0.2.2", sinkPort, 70000),
			GuestShell("fails", "", "echo about to fail; exit 3"),
		},
		Timeout: 60 * time.Second,
	}
	g := StartGuest(t, cfg)

	type got struct {
		n   int64
		sum string
		err error
	}
	sunk := make(chan got, 1)
	go func() {
		c, err := sink.Accept()
		if err != nil {
			sunk <- got{err: err}
			return
		}
		defer c.Close()
		h := sha256.New()
		n, err := io.Copy(h, c)
		sunk <- got{n, hex.EncodeToString(h.Sum(nil)), err}
	}()
	sent := make([]byte, 100000)
	_, _ = rand.Read(sent)
	sentSum := sha256.Sum256(sent)
	if !g.WaitReady("from-host", 45*time.Second) {
		t.Error("the guest never said it listens on port 5003")
	} else if c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", fwdPort)); err != nil {
		t.Errorf("connect to the guest: %v", err)
	} else {
		if _, err := c.Write(sent); err != nil {
			t.Errorf("send to the guest: %v", err)
		}
		c.Close()
	}
	r := g.Wait()
	t.Logf("guest run: %v wall, guest uptime %.2fs at script start, %.2fs at end",
		r.Duration.Round(time.Millisecond), r.BeginUptime, r.EndUptime)

	requireSaneClock(t, r)
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
	// Host -> guest: the guest got what this process sent.
	if fh := r.Result("from-host"); fh.Bytes != int64(len(sent)) || fh.SHA256 != hex.EncodeToString(sentSum[:]) {
		t.Errorf("from-host: guest got %d bytes sha256 %s, sent %d bytes sha256 %x", fh.Bytes, fh.SHA256, len(sent), sentSum)
	}
	// Guest -> host: this process got what the guest says it sent.
	select {
	case s := <-sunk:
		th := r.Result("to-host")
		if s.err != nil || s.n != 70000 || s.n != th.SentBytes || s.sum != th.SentSHA256 {
			t.Errorf("to-host: got %d bytes sha256 %s (%v), guest sent %d bytes sha256 %s", s.n, s.sum, s.err, th.SentBytes, th.SentSHA256)
		}
	case <-time.After(5 * time.Second):
		t.Error("to-host: nothing arrived from the guest")
	}
	// No IPv6 chatter (router solicitations, MLD) to skew frame counts.
	if a, b := r.Result("ipv6-off").Output, r.Result("ipv6-off-root").Output; strings.Join(a, ",") != "1,1" || strings.Join(b, ",") != "1" {
		t.Errorf("IPv6 not disabled: namespace %q, root %q", a, b)
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

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// TestGuestFailureModes checks that a guest which cannot run is reported as
// such, quickly, without a boot: QEMU exits at once when a client-mode
// vhost-user socket has no listener, and a back-end that accepts but never
// answers hangs QEMU until the harness's timeout kills it.
func TestGuestFailureModes(t *testing.T) {
	dir := t.TempDir()
	t.Run("no-backend", func(t *testing.T) {
		cfg := GuestConfig{NICs: []GuestNIC{{Socket: filepath.Join(dir, "nobody.sock")}},
			Commands: []GuestCommand{GuestShell("x", "", "true")}, Timeout: 30 * time.Second}
		r := StartGuest(t, cfg).Wait()
		if r.Completed || r.TimedOut || !strings.Contains(r.QEMUOutput, "nobody.sock") {
			t.Fatalf("want QEMU to exit at once naming the socket: completed %v, timed out %v, output %q",
				r.Completed, r.TimedOut, r.QEMUOutput)
		}
		if f := r.Failures(cfg.Commands); len(f) != 2 {
			t.Errorf("failures: %q", f)
		}
	})
	t.Run("silent-backend", func(t *testing.T) {
		sock := filepath.Join(dir, "silent.sock")
		l, err := net.Listen("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		go func() {
			// Accept and say nothing: QEMU waits for replies forever.
			var conns []net.Conn
			for {
				c, err := l.Accept()
				if err != nil {
					for _, c := range conns {
						c.Close()
					}
					return
				}
				conns = append(conns, c)
			}
		}()
		cfg := GuestConfig{NICs: []GuestNIC{{Socket: sock}}, Timeout: 3 * time.Second}
		r := StartGuest(t, cfg).Wait()
		// Hung before the firmware ran: the console is empty.
		if !r.TimedOut || r.Completed || r.Console != "" {
			t.Fatalf("want the harness to kill a QEMU hung before boot: timed out %v, completed %v, console %q",
				r.TimedOut, r.Completed, r.Console)
		}
	})
}

// requireSaneClock checks that the guest's clock did not run faster than
// real time: its uptime at the end of its script cannot exceed the wall
// time since QEMU started (a 5x fast clock was seen with a trusted TSC).
func requireSaneClock(t *testing.T, r *GuestRun) {
	t.Helper()
	if r.EndUptime > r.Duration.Seconds()+0.5 {
		t.Errorf("guest clock runs fast: uptime %.2fs at the end of a %.2fs run", r.EndUptime, r.Duration.Seconds())
	}
}
