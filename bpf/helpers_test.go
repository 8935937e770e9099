package bpf

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/xvswitch/xvswitch/test/netns"
	"github.com/xvswitch/xvswitch/test/require"
)

func TestMain(m *testing.M) {
	// The stale-pin test re-runs this binary as a process that attaches
	// and is then killed: the crash whose pins the next Attach must replace.
	if ifname := os.Getenv(crashChildEnv); ifname != "" {
		crashChild(ifname)
		return
	}
	os.Exit(m.Run())
}

// logBuffer collects what the loader logs, for assertions.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func newLogger() (*slog.Logger, *logBuffer) {
	b := &logBuffer{}
	return slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug})), b
}

// lab is a veth pair whose outer end (root namespace, the "NIC") has the
// steering program attached, and whose inner end (a namespace) plays the
// wire: a host that sends to the outer end's address and to VMs' MACs.
type lab struct {
	*netns.Veth
	S                 *Steering
	Log               *logBuffer
	Net               string // "10.x.y": the /24 of the pair
	OuterIP, InnerIP  string
	VMIP, BcastIP     string
	OuterMAC, InnerMC string
}

// newLab builds the pair and attaches with p. Addresses are random so
// parallel tests (and other packages' tests) never share a subnet.
func newLab(t *testing.T, p Policy) *lab {
	t.Helper()
	return newLabQueues(t, p, 1)
}

// newLabQueues is newLab with a veth of the given number of rx/tx queues.
func newLabQueues(t *testing.T, p Policy, queues int) *lab {
	t.Helper()
	require.Root(t)
	require.Commands(t, "ip")
	var b [2]byte
	_, _ = rand.Read(b[:])
	n := fmt.Sprintf("10.%d.%d", 160+int(b[0])%64, b[1])
	l := &lab{Net: n, OuterIP: n + ".1", InnerIP: n + ".2", VMIP: n + ".9", BcastIP: n + ".255"}
	l.Veth = netns.NewVeth(t, netns.VethOptions{Queues: queues, OuterAddr: l.OuterIP + "/24", InnerAddr: l.InnerIP + "/24"})
	// A quiet wire: no IPv6 chatter (router solicitations, MLD) from the
	// namespace, so the counters see only the frames a test sends.
	l.NS.MustRun(t, "sysctl", "-q", "-w", "net.ipv6.conf.all.disable_ipv6=1")
	l.NS.MustRun(t, "sysctl", "-q", "-w", "net.ipv6.conf."+l.Inner+".disable_ipv6=1")
	l.NS.MustRun(t, "ip", "route", "add", "224.0.0.0/4", "dev", l.Inner)
	l.OuterMAC = netns.MAC(t, nil, l.Outer)
	log, buf := newLogger()
	s, err := Attach(l.Outer, Options{Policy: p, Logger: log})
	if err != nil {
		t.Fatalf("Attach(%s): %v", l.Outer, err)
	}
	t.Cleanup(func() { _ = s.Close() })
	l.S, l.Log = s, buf
	return l
}

// udp sends n datagrams from the namespace to addr ("ip:port").
func (l *lab) udp(t *testing.T, addr string, n int) {
	t.Helper()
	err := l.NS.Do(func() error {
		c, err := net.Dial("udp4", addr)
		if err != nil {
			return err
		}
		defer c.Close()
		for range n {
			if _, err := c.Write([]byte("xvswitch steering test")); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("send to %s from %s: %v", addr, l.NS.Name, err)
	}
}

// neigh makes the namespace reach ip at mac without ARP.
func (l *lab) neigh(t *testing.T, ip, mac string) {
	t.Helper()
	l.NS.MustRun(t, "ip", "neigh", "replace", ip, "lladdr", mac, "dev", l.Inner, "nud", "permanent")
}

func (l *lab) counters(t *testing.T) Counters {
	t.Helper()
	c, err := l.S.Counters()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// waitDelta waits until the counters moved at least as far as want from
// base in every field want sets (veth hands frames to XDP in NAPI, after
// sendto returned), then waits for a quiet moment and returns the delta.
// It waits for an outcome, it does not time anything: the deadline only
// bounds a test that would otherwise hang.
func (l *lab) waitDelta(t *testing.T, base, want Counters) Counters {
	t.Helper()
	return l.waitFor(t, base, fmt.Sprintf("%+v", want), func(d Counters) bool { return reached(d, want) })
}

// waitFor is waitDelta with any condition on the delta.
func (l *lab) waitFor(t *testing.T, base Counters, what string, ok func(Counters) bool) Counters {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		d := l.counters(t).Sub(base)
		if ok(d) {
			// Let stragglers land, so exact comparisons see them.
			time.Sleep(50 * time.Millisecond)
			return l.counters(t).Sub(base)
		}
		if time.Now().After(deadline) {
			t.Fatalf("counters never reached %s; delta is %+v", what, d)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func reached(d, w Counters) bool {
	return d.Redirected >= w.Redirected && d.NoSocketPassed >= w.NoSocketPassed &&
		d.BadQueuePassed >= w.BadQueuePassed && d.NotOwnedPassed >= w.NotOwnedPassed &&
		d.ShortPassed >= w.ShortPassed && d.HostARPPassed >= w.HostARPPassed &&
		d.HostNDPassed >= w.HostNDPassed && d.SteeredBroadcast >= w.SteeredBroadcast &&
		d.SteeredMulticast >= w.SteeredMulticast && d.GroupPassed >= w.GroupPassed
}

// rxPackets is the outer end's kernel rx counter.
func rxPackets(t *testing.T, ifname string) uint64 {
	t.Helper()
	b, err := os.ReadFile("/sys/class/net/" + ifname + "/statistics/rx_packets")
	if err != nil {
		t.Fatal(err)
	}
	var n uint64
	if _, err := fmt.Sscan(strings.TrimSpace(string(b)), &n); err != nil {
		t.Fatal(err)
	}
	return n
}
