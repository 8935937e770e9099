package testpmd

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/xvswitch/xvswitch/test/netns"
	"github.com/xvswitch/xvswitch/test/require"
)

// CPU plan for two testpmds on 2 CPUs: both main lcores and the
// front-end's forwarding lcore on CPU 0, the back-end's forwarding lcore
// alone on CPU 1 (the role xvswitch will have). Main lcores sleep or read
// commands, so sharing CPU 0 costs little.
const (
	frontCPU = 0
	backCPU  = 1
)

func requireTestpmd(t *testing.T) {
	t.Helper()
	require.Root(t)
	require.Commands(t, "dpdk-testpmd", "stdbuf")
}

// TestTestpmdTxonlyFrameBytes records what txonly sends (one tx_first
// burst into a pcap port, interactive mode) and compares it byte for byte
// with TxonlyFrame.
func TestTestpmdTxonlyFrameBytes(t *testing.T) {
	requireTestpmd(t)
	pcap := filepath.Join(t.TempDir(), "tx.pcap")
	const size = 100
	peer := []byte{0x02, 0x11, 0x22, 0x33, 0x44, 0x55}
	tp := Start(t, Config{
		Name:        "pcap",
		Ports:       []Port{{Kind: Pcap, TxPcap: pcap}},
		Mode:        "rxonly", // after the first burst, send nothing more
		FrameSize:   size,
		EthPeers:    map[int]string{0: "02:11:22:33:44:55"},
		Interactive: true,
	})
	if err := tp.Cmd("start tx_first 1"); err != nil {
		t.Fatal(err)
	}
	fwd, err := tp.StopForwarding(10 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if fwd.Ports[0].TxPackets != 32 || fwd.Ports[0].TxDropped != 0 {
		t.Fatalf("one burst: want 32 frames sent, none dropped; got %+v", fwd.Ports[0])
	}
	if _, err := tp.Stop(); err != nil { // flushes the pcap
		t.Fatal(err)
	}
	frames, err := ReadPcap(pcap, 0)
	if err != nil {
		t.Fatal(err)
	}
	want, err := TxonlyFrame(peer, tp.MAC(0), size)
	if err != nil {
		t.Fatal(err)
	}
	if len(frames) != 32 {
		t.Fatalf("pcap holds %d frames, want 32", len(frames))
	}
	for i, f := range frames {
		if !bytes.Equal(f, want) {
			t.Fatalf("frame %d:\n got % x\nwant % x", i, f, want)
		}
	}
}

// TestTestpmdVhostPair: two testpmds, a virtio-user front-end and a
// vhost-user back-end on one socket. First the front-end sends (txonly)
// and the back-end receives (rxonly), then the reverse. Each way the
// receiver gets exactly the frames the sender's port accepted, with the
// right length. Both run interactively so that one pair of processes
// serves both directions ("set fwd" between them) and statistics come
// every 200 ms. The split variant also swaps who listens: the front-end is
// the server (it blocks in probe until the back-end, a client, connects:
// NoWait, then WaitReady), and uses two queue pairs (one forwarding lcore
// serves both), a 1024-entry ring and a chosen MAC.
func TestTestpmdVhostPair(t *testing.T) {
	requireTestpmd(t)
	for _, tc := range []struct {
		name                 string
		packed, mrg, inOrder bool
		frame                int
		frontListens         bool
		queues, ringSize     int
		mac                  string
	}{
		{"packed", true, true, true, 64, false, 1, 0, ""},
		{"split-frontend-listens-2q", false, false, false, 1024, true, 2, 1024, "02:00:00:00:aa:01"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sock := filepath.Join(t.TempDir(), "vhost.sock")
			backCfg := Config{
				Name:        "back",
				Ports:       []Port{{Kind: VhostUser, Path: sock, Client: tc.frontListens, Queues: tc.queues}},
				FrameSize:   tc.frame,
				FwdCPUs:     []int{backCPU},
				Interactive: true,
				StatsPeriod: 200 * time.Millisecond,
			}
			frontCfg := Config{
				Name: "front",
				Ports: []Port{{Kind: VirtioUser, Path: sock, Server: tc.frontListens,
					Packed: tc.packed, MrgRxbuf: tc.mrg, InOrder: tc.inOrder,
					Queues: tc.queues, QueueSize: tc.ringSize, MAC: tc.mac}},
				FrameSize:   tc.frame,
				FwdCPUs:     []int{frontCPU},
				Interactive: true,
				StatsPeriod: 200 * time.Millisecond,
				NoWait:      tc.frontListens,
			}
			var back, front *Process
			if tc.frontListens {
				front = Start(t, frontCfg)
				back = Start(t, backCfg)
				if err := front.WaitReady(30 * time.Second); err != nil {
					t.Fatal(err)
				}
			} else {
				back = Start(t, backCfg)
				front = Start(t, frontCfg)
			}
			if tc.mac != "" && front.MAC(0).String() != tc.mac {
				t.Errorf("front-end MAC %v, want %s", front.MAC(0), tc.mac)
			}
			t.Run("virtio-user-to-vhost", func(t *testing.T) { sendAndCount(t, front, back, tc.frame) })
			if err := front.WaitOutput(fmt.Sprintf("streams=%d", tc.queues), 5*time.Second); err != nil {
				t.Errorf("want %d forwarding streams (one per queue): %v", tc.queues, err)
			}
			t.Run("vhost-to-virtio-user", func(t *testing.T) { sendAndCount(t, back, front, tc.frame) })
		})
	}
}

// sendAndCount runs txonly on the sender's port 0 into rxonly on the
// receiver's port 0 (both interactive) for half a second and checks that
// the receiver got exactly what the sender's port accepted. The count is
// exact because the sender stops with "stop": forwarding ends but its
// device stays up, so the receiver drains the ring before its own
// forwarding stops. (Stopping a sender with SIGINT instead closes its
// device within milliseconds and loses what is still in the ring if the
// receiver is off-CPU: seen here on a loaded machine, 32 to 256 frames, at
// most one ring.)
func sendAndCount(t *testing.T, sender, receiver *Process, frame int) {
	t.Helper()
	base := receiver.Stats()[0]
	for _, c := range []struct {
		tp  *Process
		cmd string
	}{{receiver, "set fwd rxonly"}, {receiver, "start"}, {sender, "set fwd txonly"}, {sender, "start"}} {
		if err := c.tp.Cmd(c.cmd); err != nil {
			t.Fatal(err)
		}
	}
	flowing := func(m map[int]PortStats) bool { return m[0].RxPackets > base.RxPackets }
	if err := receiver.WaitStats(flowing, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	rate := receiver.Stats()[0].RxPPS
	tx, err := sender.StopForwarding(10 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	sent := tx.Ports[0].TxPackets
	// Once traffic has stopped a block's counters are consistent (while it
	// flows, packets and bytes are read at slightly different moments).
	var settled PortStats
	drained := func(m map[int]PortStats) bool {
		settled = m[0]
		return m[0].RxPackets-base.RxPackets >= sent
	}
	if err := receiver.WaitStats(drained, 10*time.Second); err != nil {
		t.Fatalf("sender sent %d frames, receiver has %d: %v", sent, settled.RxPackets-base.RxPackets, err)
	}
	rx, err := receiver.StopForwarding(10 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	got := rx.Ports[0].RxPackets
	t.Logf("sent %d (not accepted by the port: %d), received %d; %.2f Mpps of %d-byte frames (one sample, shared machine)",
		sent, tx.Ports[0].TxDropped, got, float64(rate)/1e6, frame)
	if got == 0 || got != sent || settled.RxPackets-base.RxPackets != sent {
		t.Fatalf("sent %d frames, receiver counted %d (forward statistics) and %d (port statistics)",
			sent, got, settled.RxPackets-base.RxPackets)
	}
	if bytes := settled.RxBytes - base.RxBytes; bytes != sent*uint64(frame) {
		t.Fatalf("receiver counted %d bytes in %d frames, want %d bytes each", bytes, sent, frame)
	}
}

// TestTestpmdNoBackend: a front-end whose socket has no listener fails
// readiness at once with testpmd's reason, instead of timing out.
func TestTestpmdNoBackend(t *testing.T) {
	requireTestpmd(t)
	tp := Start(t, Config{
		Name:   "orphan",
		Ports:  []Port{{Kind: VirtioUser, Path: filepath.Join(t.TempDir(), "none.sock")}},
		Mode:   "txonly",
		NoWait: true,
	})
	t0 := time.Now()
	err := tp.WaitReady(20 * time.Second)
	if !errors.Is(err, ErrHarness) || !strings.Contains(err.Error(), "probe failed") {
		t.Fatalf("want a probe failure, got %v", err)
	}
	if d := time.Since(t0); d > 15*time.Second {
		t.Fatalf("the failure took %v to notice", d)
	}
}

// TestTestpmdClosedLoop is the bench's VM<->VM shape in interactive mode:
// a front-end with two virtio-user ports in io mode, primed with
// "start tx_first 4", and a back-end with two vhost ports forwarding
// 0<->1. The 128 primed frames circulate: each port receives far more
// frames than were ever generated, and after forwarding stops the frames
// generated are all accounted for (received back, dropped, or in flight).
func TestTestpmdClosedLoop(t *testing.T) {
	requireTestpmd(t)
	dir := t.TempDir()
	s0, s1 := filepath.Join(dir, "v0.sock"), filepath.Join(dir, "v1.sock")
	back := Start(t, Config{
		Name:        "back",
		Ports:       []Port{{Kind: VhostUser, Path: s0}, {Kind: VhostUser, Path: s1}},
		Mode:        "io",
		FwdCPUs:     []int{backCPU},
		Interactive: true,
	})
	vu := func(p string) Port {
		return Port{Kind: VirtioUser, Path: p, Packed: true, MrgRxbuf: true, InOrder: true}
	}
	front := Start(t, Config{
		Name:        "front",
		Ports:       []Port{vu(s0), vu(s1)},
		Mode:        "io",
		FwdCPUs:     []int{frontCPU},
		Interactive: true,
		StatsPeriod: 200 * time.Millisecond,
	})
	if err := back.Cmd("start"); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	if err := front.Cmd("start tx_first 4"); err != nil {
		t.Fatal(err)
	}
	const primed = 2 * 4 * 32 // two ports, 4 bursts of 32
	circulating := func(m map[int]PortStats) bool {
		return m[0].RxPackets > 100*primed && m[1].RxPackets > 100*primed
	}
	if err := front.WaitStats(circulating, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	// The forward statistics so far, forwarding going on.
	mid, err := back.ShowFwdStats(10 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(mid.Ports) != 2 || mid.Ports[0].RxPackets == 0 || mid.Ports[1].RxPackets == 0 {
		t.Errorf("back-end's forward statistics while forwarding: %+v", mid)
	}
	f, err := front.StopForwarding(10 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	elapsed := time.Since(t0)
	b, err := back.StopForwarding(10 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("front: %+v; back: %+v; ~%.2f Mpps through the back-end (both directions, %v, shared machine)",
		f.Total, b.Total, float64(f.Total.RxPackets)/elapsed.Seconds()/1e6, elapsed.Round(time.Millisecond))
	// Every frame the front-end transmitted was primed or received back.
	if f.Total.TxTotal != f.Total.RxPackets+primed {
		t.Errorf("front-end sent %d (incl. dropped), want received %d + primed %d",
			f.Total.TxTotal, f.Total.RxPackets, primed)
	}
	// Every frame the back-end received it forwarded (or dropped).
	if b.Total.RxPackets != b.Total.TxTotal {
		t.Errorf("back-end received %d, forwarded+dropped %d", b.Total.RxPackets, b.Total.TxTotal)
	}
	if b.Total.RxPackets < mid.Total.RxPackets {
		t.Errorf("back-end received %d in all, %d by the middle of the run", b.Total.RxPackets, mid.Total.RxPackets)
	}
	// Each side received only what the other sent (the rest is in flight
	// or, for frames the back-end sent after the front-end stopped, in
	// the front-end's rings).
	if b.Total.RxPackets > f.Total.TxPackets || f.Total.RxPackets > b.Total.TxPackets {
		t.Errorf("front sent %d, back received %d; back sent %d, front received %d",
			f.Total.TxPackets, b.Total.RxPackets, b.Total.TxPackets, f.Total.RxPackets)
	}
}

// TestTestpmdAFXDPTxonly: testpmd as a traffic generator on the NIC side
// (net_af_xdp on the outer end of a veth, copy mode): what it sends arrives
// at the inner end. The inner end may also count a few frames the kernel
// sends on its own (IPv6 neighbour discovery, MLD), hence the slack.
func TestTestpmdAFXDPTxonly(t *testing.T) {
	requireTestpmd(t)
	v := netns.NewVeth(t, netns.VethOptions{})
	rxPackets := func() uint64 {
		out := v.NS.MustRun(t, "cat", "/sys/class/net/"+v.Inner+"/statistics/rx_packets")
		n, err := strconv.ParseUint(strings.TrimSpace(out), 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := rxPackets()
	tp := Start(t, Config{
		Name:     "xdp",
		Ports:    []Port{{Kind: AFXDP, Iface: v.Outer}},
		Mode:     "txonly",
		EthPeers: map[int]string{0: netns.MAC(t, v.NS, v.Inner)},
		FwdCPUs:  []int{1},
	})
	if err := tp.WaitStats(func(m map[int]PortStats) bool { return m[0].TxPackets > 0 }, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	fwd, err := tp.Stop()
	if err != nil {
		t.Fatal(err)
	}
	got := rxPackets() - before
	sent := fwd.Ports[0].TxPackets
	t.Logf("af_xdp TX %d (dropped %d), inner end RX %d", sent, fwd.Ports[0].TxDropped, got)
	if sent == 0 || got < sent || got > sent+50 {
		t.Fatalf("testpmd sent %d frames on %s, %s received %d", sent, v.Outer, v.Inner, got)
	}
}
