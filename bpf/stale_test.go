package bpf

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/xvswitch/xvswitch/test/netns"
	"github.com/xvswitch/xvswitch/test/require"
)

const crashChildEnv = "XVS_BPF_TEST_CRASH_CHILD"

// crashChild attaches to ifname, reports the link, and waits to be killed.
func crashChild(ifname string) {
	s, err := Attach(ifname, Options{Policy: Policy{Mode: ModeAll}})
	if err != nil {
		fmt.Printf("error %v\n", err)
		os.Exit(1)
	}
	info, err := s.link.Info()
	if err != nil {
		fmt.Printf("error %v\n", err)
		os.Exit(1)
	}
	fmt.Printf("attached %d %d\n", info.ID, info.Program)
	select {} // until SIGKILL: no Close, no deferred cleanup
}

// abandon drops everything the way a dying process does (its fds close,
// its flock goes) but leaves the pins: the in-process stand-in for a crash.
func (s *Steering) abandon() {
	_ = s.link.Close()
	_ = s.objs.Close()
	unix.Close(s.lockFD)
	s.closed = true
}

// attachedProg is the ID of the XDP program the kernel runs on ifname (0:
// none), read with iproute2, independently of the loader.
func attachedProg(t *testing.T, ifname string) uint32 {
	t.Helper()
	out := netns.MustRun(t, "ip", "-j", "link", "show", "dev", ifname)
	var links []struct {
		XDP *struct {
			Prog *struct {
				ID uint32 `json:"id"`
			} `json:"prog"`
			Attached []struct {
				Prog *struct {
					ID uint32 `json:"id"`
				} `json:"prog"`
			} `json:"attached"`
		} `json:"xdp"`
	}
	if err := json.Unmarshal([]byte(out), &links); err != nil || len(links) != 1 {
		t.Fatalf("ip -j link show %s: %v\n%s", ifname, err, out)
	}
	x := links[0].XDP
	if x == nil {
		return 0
	}
	if x.Prog != nil {
		return x.Prog.ID
	}
	for _, a := range x.Attached {
		if a.Prog != nil {
			return a.Prog.ID
		}
	}
	t.Fatalf("ip -j link show %s: xdp without a program id:\n%s", ifname, out)
	return 0
}

func progID(t *testing.T, s *Steering) uint32 {
	t.Helper()
	info, err := s.link.Info()
	if err != nil {
		t.Fatal(err)
	}
	return uint32(info.Program)
}

func pinNames(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var n []string
	for _, e := range ents {
		n = append(n, e.Name())
	}
	return n
}

// checkReplaced attaches over the stale pins of a dead owner whose program
// was oldProg, and checks the result: new program running, log says so,
// frames counted by the new instance, Close leaves nothing behind.
func checkReplaced(t *testing.T, l *lab, oldProg uint32) {
	t.Helper()
	if got := attachedProg(t, l.Outer); got != oldProg {
		t.Fatalf("before re-attach: kernel runs prog %d, dead owner's was %d", got, oldProg)
	}
	log, buf := newLogger()
	s, err := Attach(l.Outer, Options{Policy: Policy{Mode: ModeMAC}, Logger: log})
	if err != nil {
		t.Fatalf("Attach over stale pins: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	l.S = s
	newProg := progID(t, s)
	if newProg == oldProg {
		t.Fatalf("new program has the old ID %d", oldProg)
	}
	if got := attachedProg(t, l.Outer); got != newProg {
		t.Fatalf("after re-attach: kernel runs prog %d, want the new %d", got, newProg)
	}
	if !strings.Contains(buf.String(), "replaced stale pins") || !strings.Contains(buf.String(), fmt.Sprintf("prog_id=%d", oldProg)) {
		t.Errorf("replacement not logged with the old program's ID %d:\n%s", oldProg, buf)
	}
	// The new instance counts (and its fresh maps know no stale policy).
	c0 := l.counters(t)
	l.ping(t, l.OuterIP, 2)
	if d := l.waitDelta(t, c0, Counters{NotOwnedPassed: 2}); d.Steered() != 0 {
		t.Fatalf("new instance: %+v", d)
	}
	want := []string{"config", "counters", "host_v4", "host_v6", "link", "macs", "queue_owners", "xsks", "xvs_steer"}
	if got := pinNames(t, s.PinDir()); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("pins %v, want %v", got, want)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(s.PinDir()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("pin dir after Close: %v", err)
	}
	if got := attachedProg(t, l.Outer); got != 0 {
		t.Errorf("prog %d still attached after Close", got)
	}
}

// A run that was SIGKILLed leaves its link and maps pinned and its program
// attached; the next Attach detects that, replaces it, and says so.
func TestStalePinOfKilledProcess(t *testing.T) {
	t.Parallel()
	require.Commands(t, "ping")
	l := newLab(t, Policy{})
	if err := l.S.Close(); err != nil { // the child owns the interface
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), crashChildEnv+"="+l.Outer)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(out).ReadString('\n')
		line <- s
	}()
	var got string
	select {
	case got = <-line:
	case <-time.After(60 * time.Second): // a bound on a hang, not a timing check
		_ = cmd.Process.Kill()
		t.Fatal("child never reported")
	}
	var linkID, prog uint32
	if _, err := fmt.Sscanf(got, "attached %d %d", &linkID, &prog); err != nil {
		_ = cmd.Process.Kill()
		t.Fatalf("child: %q", got)
	}
	_ = cmd.Process.Signal(unix.SIGKILL)
	_ = cmd.Wait()
	dir := filepath.Join(PinRoot, l.Outer)
	if n := pinNames(t, dir); len(n) != 9 {
		t.Fatalf("dead child left pins %v, want 9", n)
	}
	// Its pinned link keeps its program attached after its death.
	if l2, err := link.NewFromID(link.ID(linkID)); err != nil {
		t.Fatalf("dead child's link %d: %v", linkID, err)
	} else {
		_ = l2.Close()
	}
	checkReplaced(t, l, prog)
}

// The same with the crash played in-process: a first Steering is dropped
// without Close (fds and lock gone, pins kept).
func TestStalePinOfAbandonedSteering(t *testing.T) {
	t.Parallel()
	require.Commands(t, "ping")
	l := newLab(t, Policy{Mode: ModeAll})
	old := progID(t, l.S)
	l.S.abandon()
	checkReplaced(t, l, old)
}

// A live owner is not stale: a second Attach fails with ErrBusy and leaves
// the first one working.
func TestAttachBusy(t *testing.T) {
	t.Parallel()
	require.Commands(t, "ping")
	l := newLab(t, Policy{Mode: ModeMAC})
	prog := progID(t, l.S)
	if s, err := Attach(l.Outer, Options{}); !errors.Is(err, ErrBusy) {
		if s != nil {
			_ = s.Close()
		}
		t.Fatalf("second Attach: %v, want ErrBusy", err)
	}
	if got := attachedProg(t, l.Outer); got != prog {
		t.Fatalf("kernel runs prog %d, want the first owner's %d", got, prog)
	}
	c0 := l.counters(t)
	l.ping(t, l.OuterIP, 1)
	l.waitDelta(t, c0, Counters{NotOwnedPassed: 1})
	if n := pinNames(t, l.S.PinDir()); len(n) != 9 {
		t.Fatalf("pins after refused Attach: %v", n)
	}
}
