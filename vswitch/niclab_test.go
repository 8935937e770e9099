package vswitch

import (
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/xvswitch/xvswitch/bpf"
	"github.com/xvswitch/xvswitch/ctl"
	"github.com/xvswitch/xvswitch/portspec"
	"github.com/xvswitch/xvswitch/test/netns"
	"github.com/xvswitch/xvswitch/test/require"
)

// What the NIC fault tests share: two veth "NICs" on the learning bridge,
// host A behind one and host B behind the other, and the checks that a
// fault and its recovery left nothing behind.

// nicLab is host A (namespace of a) and host B (namespace of b) on the
// bridge; b's outer end also carries a host address, which its steering
// program must keep passing to the kernel.
type nicLab struct {
	s          *Switch
	a, b       *netns.Veth
	aIP, bIP   string // the hosts' addresses
	bHost      string // the host's own address on b's outer end
	bOpts      netns.VethOptions
	goroutines int // before the ports were added
	fds        int
}

// newNICLab builds the lab with both ports added and checks that A
// reaches B. The watchers look at the interfaces every 100 ms, so a
// recovery that needs a look (a detached XDP program sends no netlink
// event) shows within a test's patience.
func newNICLab(t *testing.T) *nicLab {
	t.Helper()
	require.Root(t)
	require.Commands(t, "ip", "ping")
	old := nicCheckInterval
	nicCheckInterval = 100 * time.Millisecond
	t.Cleanup(func() { nicCheckInterval = old })
	var r [2]byte
	_, _ = rand.Read(r[:])
	net := fmt.Sprintf("10.%d.%d", 96+int(r[0])%32, r[1])
	l := &nicLab{aIP: net + ".1", bIP: net + ".2", bHost: net + ".3"}
	l.a = netns.NewVeth(t, netns.VethOptions{InnerAddr: l.aIP + "/24"})
	l.bOpts = netns.VethOptions{InnerAddr: l.bIP + "/24", OuterAddr: l.bHost + "/24"}
	l.b = netns.NewVeth(t, l.bOpts)
	for _, v := range []*netns.Veth{l.a, l.b} {
		// No IPv6 chatter from the hosts: the counters see the test's frames.
		v.NS.MustRun(t, "sysctl", "-q", "-w", "net.ipv6.conf.all.disable_ipv6=1")
	}
	l.s = startTestSwitch(t, Config{Workers: 1})
	// A worker that slept has made its epoll set: the fds counted now
	// are the switch's own.
	waitFor(t, "the worker to go idle", func() bool { return l.s.WorkerSleeps()[0] > 0 })
	l.goroutines, l.fds = runtime.NumGoroutine(), openFDs(t)
	for _, v := range []*netns.Veth{l.a, l.b} {
		if err := l.s.AddNIC(portspec.NIC{Name: v.Outer, Ifname: v.Outer, Mode: portspec.ModeCopy}); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(l.s.removeAll)
	if !l.ping(t, 0, 5*time.Second) {
		t.Fatalf("A cannot reach B across the switch: %+v", l.s.Stats())
	}
	return l
}

// ping reports whether A gets an echo reply from B (ICMP payload size
// bytes; 0: ping's default) before within passes.
func (l *nicLab) ping(t *testing.T, size int, within time.Duration) bool {
	t.Helper()
	args := []string{"-c", "1", "-W", "1"}
	if size > 0 {
		args = append(args, "-M", "do", "-s", fmt.Sprint(size))
	}
	deadline := time.Now().Add(within)
	for {
		if l.a.NS.Exec("ping", append(args, l.bIP)...).Run() == nil {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// pingFails checks that A's n echo requests to B all go unanswered.
func (l *nicLab) pingFails(t *testing.T, size, n int) {
	t.Helper()
	args := []string{"-c", fmt.Sprint(n), "-i", "0.2", "-W", "1"}
	if size > 0 {
		args = append(args, "-M", "do", "-s", fmt.Sprint(size))
	}
	if out, err := l.a.NS.Exec("ping", append(args, l.bIP)...).CombinedOutput(); err == nil {
		t.Fatalf("B answered A:\n%s", out)
	}
}

// steering is the steering program port name has attached now (read
// under the lock its watcher replaces it under).
func (l *nicLab) steering(t *testing.T, name string) *bpf.Steering {
	t.Helper()
	l.s.mu.Lock()
	defer l.s.mu.Unlock()
	p := l.s.byName[name]
	if p == nil {
		t.Fatalf("no port %s", name)
	}
	return p.drv.(*nicPort).bound.steer
}

func (l *nicLab) info(t *testing.T, name string) ctl.PortInfo {
	t.Helper()
	return row(t, l.s.Ports(), name, func(p ctl.PortInfo) string { return p.Name })
}

func (l *nicLab) stats(t *testing.T, name string) ctl.PortCounters {
	t.Helper()
	return row(t, l.s.Stats(), name, func(p ctl.PortCounters) string { return p.Name })
}

// row is port name's row of a `show` answer.
func row[T any](t *testing.T, rows []T, name string, nameOf func(T) string) T {
	t.Helper()
	for _, r := range rows {
		if nameOf(r) == name {
			return r
		}
	}
	t.Fatalf("no port %s in %+v", name, rows)
	var none T
	return none
}

// waitState waits until `show ports` gives port name the state want.
func (l *nicLab) waitState(t *testing.T, name, want string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		got := l.info(t, name)
		if got.State == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("port %s: state %q (%s), want %q", name, got.State, got.Detail, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// wantKernel checks the port's kernel-side counters hold want's values.
func (l *nicLab) wantKernel(t *testing.T, name string, want map[string]uint64) {
	t.Helper()
	k := l.stats(t, name).Kernel
	for c, n := range want {
		if k[c] != n {
			t.Errorf("port %s: kernel counter %s = %d, want %d (all: %v)", name, c, k[c], n, k)
		}
	}
}

// fdTargets says what the process's fds are.
func fdTargets(t *testing.T) []string {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		dst, _ := os.Readlink(filepath.Join("/proc/self/fd", e.Name()))
		out = append(out, e.Name()+"="+dst)
	}
	return out
}

// cpuTime is the CPU time the process has used.
func cpuTime(t *testing.T) time.Duration {
	t.Helper()
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// closeAndCheck removes both ports and checks everything they held is
// gone: goroutines, fds, pins.
func (l *nicLab) closeAndCheck(t *testing.T) {
	t.Helper()
	l.s.removeAll()
	waitFor(t, "the ports' goroutines to end", func() bool { return runtime.NumGoroutine() <= l.goroutines })
	if n := openFDs(t); n != l.fds {
		t.Errorf("fds: %d before the ports, %d after removing them: %v", l.fds, n, fdTargets(t))
	}
	noPins(t, l.a.Outer)
	noPins(t, l.b.Outer)
}
