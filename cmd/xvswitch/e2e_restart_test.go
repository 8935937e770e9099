package main

import (
	"encoding/binary"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/xvswitch/xvswitch/test/netns"
	"github.com/xvswitch/xvswitch/test/qemu"
	"github.com/xvswitch/xvswitch/test/require"
)

// The restart topology: the NIC <-> VM one of e2e_test.go with a guest of
// two NICs, one on each ring kind, in vhost-user client mode (QEMU listens
// with server=on and waits for a back-end to come back):
//
//	namespace (10.96.0.1) -- veth -- [XDP + AF_XDP] xvswitch
//	    --vhost ...,client -- guest eth0, packed ring (10.96.0.2)
//	    --vhost ...,client -- guest eth1, split ring  (10.96.0.3, its own netns)
const (
	rsHost   = "10.96.0.1"
	rsPort   = 7000
	rsRate   = time.Millisecond // one datagram per NIC per rsRate
	rsResume = 2 * time.Second  // traffic must be back within this of the restart
	stopSeq  = ^uint64(0)       // udpseq's end of the stream
)

// rsNIC is one guest NIC of the restart test and what the host saw of it.
type rsNIC struct {
	name, addr, mac string
	packed          bool
	conn            *net.UDPConn

	mu     sync.Mutex
	echoes map[uint64]time.Time // first echo of each sequence number
	dupEch int                  // echoes seen more than once (the guest's TX side)
}

func (n *rsNIC) echo(seq uint64, at time.Time) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if _, ok := n.echoes[seq]; ok {
		n.dupEch++
		return
	}
	n.echoes[seq] = at
}

// firstEchoAfter is the first echo that arrived after t: its time and
// sequence number.
func (n *rsNIC) firstEchoAfter(t time.Time) (time.Time, uint64, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	var best time.Time
	var seq uint64
	for s, at := range n.echoes {
		if at.After(t) && (best.IsZero() || at.Before(best)) {
			best, seq = at, s
		}
	}
	return best, seq, !best.IsZero()
}

func (n *rsNIC) echoCount() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.echoes)
}

// TestRestartUnderTraffic: xvswitch is killed with SIGKILL while a stream
// of sequence-numbered UDP datagrams runs from the NIC side to the guest's
// two NICs (packed and split ring), and started again with the same
// arguments. QEMU keeps the guest running and hands the new xvswitch its
// rings; the new one must pick them up where the dead one left them. The
// guest counts every datagram its NICs delivered (test/qemu/guest/udpseq)
// and echoes it; the test measures how long after the restart the echoes
// come back and wants, per NIC: traffic back within rsResume, frames
// delivered both before the kill and after the restart, and none delivered
// to the guest twice. (Datagrams sent while no xvswitch runs are lost:
// that is the outage.)
func TestRestartUnderTraffic(t *testing.T) {
	require.Root(t)
	require.Commands(t, "qemu-system-x86_64")
	require.Long(t)
	qemu.EnsureGuest(t)
	tool := qemu.GuestTool(t, "github.com/xvswitch/xvswitch/test/qemu/guest/udpseq")

	v := netns.NewVeth(t, netns.VethOptions{InnerAddr: rsHost + "/24"})
	hostMAC := netns.MAC(t, v.NS, v.Inner)
	dir := t.TempDir()
	nics := []*rsNIC{
		{name: "packed", addr: "10.96.0.2", mac: "52:54:00:96:00:02", packed: true},
		{name: "split", addr: "10.96.0.3", mac: "52:54:00:96:00:03"},
	}
	args := []string{"--nic", v.Outer + ",mode=copy,name=nic0"}
	cfg := qemu.GuestConfig{
		Files:   map[string]string{"udpseq": tool},
		Timeout: 240 * time.Second,
	}
	for i, n := range nics {
		sock := filepath.Join(dir, n.name+".sock")
		args = append(args, "--vhost", fmt.Sprintf("%s,client,mac=%s,name=vm-%s", sock, n.mac, n.name))
		gn := qemu.GuestNIC{Socket: sock, Server: true, Packed: n.packed, MAC: n.mac, Addr: n.addr + "/24",
			Neigh: map[string]string{rsHost: hostMAC}, CarrierWait: 60 * time.Second}
		if i > 0 {
			gn.Netns = "b" // one NIC per namespace: each answers on its own
		}
		cfg.NICs = append(cfg.NICs, gn)
		v.NS.MustRun(t, "ip", "neigh", "replace", n.addr, "lladdr", n.mac, "dev", v.Inner, "nud", "permanent")
		n.echoes = map[uint64]time.Time{}
	}
	script := fmt.Sprintf(`nsenter -t "$(cat /tmp/ns/b)" -n /xvs/udpseq -name split -port %d -timeout 190s & p=$!
/xvs/udpseq -name packed -port %d -timeout 190s
wait $p`, rsPort, rsPort)
	cfg.Commands = []qemu.GuestCommand{qemu.GuestShell("udpseq", "", script)}
	cfg.Commands[0].Timeout = 200 * time.Second
	g := qemu.StartGuest(t, cfg)
	d := startDaemon(t, args...)

	// The host's end of each stream, in the namespace.
	for _, n := range nics {
		if err := v.NS.Do(func() (err error) {
			n.conn, err = net.DialUDP("udp4", nil, &net.UDPAddr{IP: net.ParseIP(n.addr), Port: rsPort})
			return err
		}); err != nil {
			t.Fatal(err)
		}
		defer n.conn.Close()
		go func(n *rsNIC) {
			b := make([]byte, 64)
			for {
				k, err := n.conn.Read(b)
				if err != nil {
					if strings.Contains(err.Error(), "closed") {
						return
					}
					continue // ICMP port unreachable before the guest listens
				}
				if k >= 8 {
					n.echo(binary.BigEndian.Uint64(b), time.Now())
				}
			}
		}(n)
	}
	var seq atomic.Uint64 // the next sequence number to send
	var fast atomic.Bool  // full rate once the guest listens
	stop := make(chan struct{})
	var sender sync.WaitGroup
	sender.Add(1)
	go func() {
		defer sender.Done()
		b := make([]byte, 64)
		for next := time.Now(); ; {
			select {
			case <-stop:
				return
			default:
			}
			binary.BigEndian.PutUint64(b, seq.Load())
			for _, n := range nics {
				_, _ = n.conn.Write(b)
			}
			seq.Add(1)
			if next = next.Add(rsRate); !fast.Load() {
				next = time.Now().Add(50 * time.Millisecond)
			}
			time.Sleep(time.Until(next))
		}
	}()
	defer func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		sender.Wait()
	}()

	waitEchoes := func(what string, limit time.Duration, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(limit)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: echoes %d/%d after %v", what, nics[0].echoCount(), nics[1].echoCount(), limit)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	both := func(k int) func() bool {
		return func() bool { return nics[0].echoCount() >= k && nics[1].echoCount() >= k }
	}
	waitEchoes("the guest's receivers", 150*time.Second, both(1))
	fast.Store(true)
	tFast := time.Now()
	base := nics[0].echoCount()
	waitEchoes("steady traffic", 30*time.Second, both(base+1500))

	// Kill under traffic, leave the guest without a back-end for a moment,
	// start again.
	if err := d.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	tKill := time.Now()
	lastBefore := seq.Load() - 1
	err := <-d.done
	d.done <- err
	time.Sleep(time.Second)
	tStart := time.Now()
	firstAfter := seq.Load()
	d2 := startDaemon(t, args...)
	tReady := time.Now()
	for _, n := range nics {
		waitEchoes("traffic after the restart on "+n.name, 20*time.Second, func() bool {
			_, _, ok := n.firstEchoAfter(tStart)
			return ok
		})
	}
	time.Sleep(3 * time.Second)
	close(stop)
	sender.Wait()
	lastSent := seq.Load() - 1
	time.Sleep(300 * time.Millisecond) // the last echoes
	// The end-of-stream marker, every 100 ms until the guest is done: a
	// TCG guest busy with the stream can miss a few (its RX ring full),
	// and a udpseq that never sees one runs into its timeout.
	b := make([]byte, 8)
	binary.BigEndian.PutUint64(b, stopSeq)
	guestDone := make(chan struct{})
	go func() {
		for {
			for _, n := range nics {
				_, _ = n.conn.Write(b)
			}
			select {
			case <-guestDone:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	run := g.Wait()
	close(guestDone)
	run.RequireOK(t, cfg)
	reports := parseUDPSeq(run.Result("udpseq").Output)

	t.Logf("killed at seq %d, %v into the full-rate stream; restarted %v later at seq %d (answering after %v); last seq %d",
		lastBefore, tKill.Sub(tFast).Round(time.Millisecond), tStart.Sub(tKill).Round(time.Millisecond),
		firstAfter, tReady.Sub(tStart).Round(time.Millisecond), lastSent)
	for _, n := range nics {
		r, ok := reports[n.name]
		if !ok {
			t.Errorf("%s: the guest reported nothing: %v", n.name, run.Result("udpseq").Output)
			continue
		}
		at, s, _ := n.firstEchoAfter(tStart)
		back := at.Sub(tStart)
		before, after := r.countIn(0, lastBefore), r.countIn(firstAfter, lastSent)
		t.Logf("%s ring: guest received %d datagrams, %d distinct, %d twice; %d up to the kill, %d sent after the restart; missing %d (%s); first echo after the restart %v after it (seq %d), %v after xvswitch answered; %d echoes seen twice",
			n.name, r.received, r.distinct, r.dups, before, after, r.missing, r.gaps, back.Round(time.Millisecond), s,
			at.Sub(tReady).Round(time.Millisecond), n.dupEch)
		if r.dups != 0 || r.received != r.distinct {
			t.Errorf("%s: the guest received %d datagrams twice", n.name, r.dups)
		}
		if back > rsResume {
			t.Errorf("%s: traffic came back %v after the restart (want within %v)", n.name, back, rsResume)
		}
		if before == 0 || after == 0 {
			t.Errorf("%s: %d datagrams before the kill, %d after the restart", n.name, before, after)
		}
	}
	t.Logf("restarted xvswitch:\n%s", grepLines(d2.log.String(), "vhost", 20))
	checkBalance(t, d2.stats(t))
}

// udpSeqReport is one guest receiver's report line.
type udpSeqReport struct {
	received, distinct, dups, first, last, missing uint64
	gaps                                           string
}

// countIn counts the distinct sequence numbers in [lo, hi] the guest got,
// from its first, last and gaps (all of them, while there are fewer than
// udpseq lists).
func (r udpSeqReport) countIn(lo, hi uint64) uint64 {
	lo, hi = max(lo, r.first), min(hi, r.last)
	if r.distinct == 0 || lo > hi {
		return 0
	}
	n := hi - lo + 1
	for _, g := range strings.Split(r.gaps, ",") {
		a, b, ok := strings.Cut(g, "-")
		if !ok {
			continue
		}
		ga, _ := strconv.ParseUint(a, 10, 64)
		gb, _ := strconv.ParseUint(b, 10, 64)
		if ga, gb = max(ga, lo), min(gb, hi); ga <= gb {
			n -= gb - ga + 1
		}
	}
	return n
}

func parseUDPSeq(lines []string) map[string]udpSeqReport {
	out := map[string]udpSeqReport{}
	for _, l := range lines {
		if !strings.HasPrefix(l, "udpseq ") {
			continue
		}
		kv := map[string]string{}
		for _, f := range strings.Fields(l)[1:] {
			if k, v, ok := strings.Cut(f, "="); ok {
				kv[k] = v
			}
		}
		num := func(k string) uint64 { n, _ := strconv.ParseUint(kv[k], 10, 64); return n }
		out[kv["name"]] = udpSeqReport{received: num("received"), distinct: num("distinct"), dups: num("dups"),
			first: num("first"), last: num("last"), missing: num("missing"), gaps: kv["gaps"]}
	}
	return out
}

// grepLines returns up to max lines of s that contain sub.
func grepLines(s, sub string, max int) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) && len(out) < max {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
