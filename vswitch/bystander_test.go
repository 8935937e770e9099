package vswitch

import (
	"bytes"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/xvswitch/xvswitch/vhost/vhosttest"
)

// What the hostile-guest tests share: a bystander pair of guests whose
// forwarding is measured while another guest or front-end misbehaves, and
// the process's fd and RSS counts to check nothing leaked.

// bystanders adds two well-behaved guests, a (packed) and b (split), with
// receive buffers posted.
func bystanders(t *testing.T, s *Switch) (a, b *guest) {
	t.Helper()
	a = addGuest(t, s, "bystander-a", 0x0252_5400_00a1, vhosttest.Options{Packed: true})
	b = addGuest(t, s, "bystander-b", 0x0252_5400_00b1, vhosttest.Options{})
	return a, b
}

// exchange sends n frames from a to b and n back, each verified byte for
// byte, and returns how long the round took: a bystander's forwarding
// "measured" while something else goes on. It fails the test if any frame
// is missing after waitFor's deadline. Frames from other sources (floods
// of the other traffic) are ignored.
func exchange(t *testing.T, a, b *guest, n int) time.Duration {
	t.Helper()
	start := time.Now()
	for _, dir := range []struct{ from, to *guest }{{a, b}, {b, a}} {
		dir.to.fe.PostRx(0, n)
		var want [][]byte
		for i := 0; i < n; i++ {
			want = append(want, dir.from.frameTo(dir.to.mac, i))
		}
		for sent := 0; sent < n; {
			sent += dir.from.fe.Send(0, want[sent:]...)
		}
		got := dir.to.receiveFrom(t, 0, n, dir.from.mac)
		for i := range want {
			if !bytes.Equal(got[i], want[i]) {
				t.Fatalf("bystander frame %d %s -> %s: %q", i, dir.from.name, dir.to.name, got[i])
			}
		}
	}
	return time.Since(start)
}

// openFDs is how many file descriptors the process has open.
func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// checkFDs fails t if the process has more than n file descriptors open
// (n: the count before what is checked). It waits a moment first: a close
// that a goroutine finishes after the call that asked for it returned is
// not a leak. Fewer than n is not one either: an earlier test's late close
// can land in the window (CI's race run, once: 87 -> 86); it is logged. A
// failure lists what is open, so it says what leaked.
func checkFDs(t *testing.T, n int, what string) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for openFDs(t) > n && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	switch now := openFDs(t); {
	case now > n:
		t.Errorf("fds %d -> %d %s; open now: %v", n, now, what, fdKinds(t))
	case now < n:
		t.Logf("fds %d -> %d %s: fewer, a close from outside the check landed in it", n, now, what)
	}
}

// fdKinds counts the open file descriptors by what they are (socket,
// eventfd, a file's path).
func fdKinds(t *testing.T) map[string]int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	for _, e := range ents {
		l, err := os.Readlink("/proc/self/fd/" + e.Name())
		if err != nil {
			continue // the directory's own fd, closed by now
		}
		if k, _, ok := strings.Cut(l, ":["); ok && (k == "socket" || k == "pipe") {
			l = k
		}
		kinds[l]++
	}
	return kinds
}

// rssKiB is the process's resident set size.
func rssKiB(t *testing.T) int {
	t.Helper()
	// What the process holds, not garbage the collector has not returned
	// yet: a leak check compares live memory.
	runtime.GC()
	debug.FreeOSMemory()
	return statusKiB(t, "VmRSS:")
}

// statusKiB is a size field of /proc/self/status (VmRSS:, VmSize:), in KiB.
func statusKiB(t *testing.T, field string) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field); ok {
			n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("no %s in /proc/self/status", field)
	return 0
}

// TestBystandersExchange checks the measuring helpers themselves.
func TestBystandersExchange(t *testing.T) {
	s := startTestSwitch(t, Config{Workers: 1})
	a, b := bystanders(t, s)
	fds := openFDs(t)
	if d := exchange(t, a, b, 64); d <= 0 {
		t.Fatalf("exchange took %v", d)
	}
	if rssKiB(t) <= 0 {
		t.Fatal("no RSS")
	}
	checkFDs(t, fds, "across a plain exchange")
}

// receiveFrom is receive keeping only the frames whose source MAC is src.
func (g *guest) receiveFrom(t *testing.T, p, n int, src uint64) [][]byte {
	t.Helper()
	var got [][]byte
	waitFor(t, fmt.Sprintf("%d frames from %012x at %s", n, src, g.name), func() bool {
		for _, r := range g.fe.Receive(p) {
			if len(r.Frame) >= 12 && MACKey(r.Frame[6:12]) == src {
				got = append(got, r.Frame)
			}
		}
		return len(got) >= n
	})
	return got
}
