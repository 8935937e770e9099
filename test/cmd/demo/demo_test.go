package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/xvswitch/xvswitch/test/qemu"
	"github.com/xvswitch/xvswitch/test/require"
)

// binaries builds xvswitch (as `make build` does) and the demo into a
// temporary directory.
func binaries(t *testing.T) (xvswitchBin, demoBin string) {
	t.Helper()
	dir := t.TempDir()
	xvswitchBin, demoBin = filepath.Join(dir, "xvswitch"), filepath.Join(dir, "demo")
	for _, b := range [][2]string{
		{xvswitchBin, "github.com/xvswitch/xvswitch/cmd/xvswitch"},
		{demoBin, "github.com/xvswitch/xvswitch/test/cmd/demo"},
	} {
		cmd := exec.Command("go", "build", "-o", b[0], b[1])
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", b[1], err, out)
		}
	}
	return xvswitchBin, demoBin
}

// demoCommand is the demo as `make demo` runs it, but with this test's
// binaries and a control socket of its own (tests run beside other
// switches), stdin not a terminal.
func demoCommand(t *testing.T) (cmd *exec.Cmd, out *syncBuffer, outcomeFile string) {
	t.Helper()
	require.Root(t)
	require.Commands(t, "ip", "ping", "qemu-system-x86_64")
	qemu.EnsureGuest(t)
	xv, demo := binaries(t)
	dir := t.TempDir()
	outcomeFile = filepath.Join(dir, "outcome.json")
	cmd = exec.Command(demo, "-xvswitch", xv, "-ctl", filepath.Join(dir, "ctl.sock"), "-outcome", outcomeFile)
	out = &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	return cmd, out, outcomeFile
}

// syncBuffer is the demo's output, read while the demo writes it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

func readOutcome(t *testing.T, path string, out *syncBuffer) *outcome {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("no outcome: %v\ndemo output:\n%s", err, out)
	}
	var o outcome
	if err := json.Unmarshal(b, &o); err != nil {
		t.Fatal(err)
	}
	return &o
}

// checkGone fails t for anything of the run still on the host: the
// demo's own report of it, and the test's look after the demo exited.
func checkGone(t *testing.T, o *outcome) {
	t.Helper()
	if len(o.Leftovers) > 0 {
		t.Errorf("the demo reported leftovers: %v", o.Leftovers)
	}
	if o.Namespace == "" || o.NIC == "" || o.RunDir == "" || len(o.PIDs) == 0 {
		t.Fatalf("the outcome names no topology to check: %+v", o)
	}
	if left := o.leftovers(); len(left) > 0 {
		t.Errorf("left on the host after the demo exited: %v", left)
	}
}

// TestDemo runs the demo as `make demo` does without a terminal and judges
// it by what it did: pings answered, both TCP streams intact, the
// switch's counters balanced with the streams' bytes in them, the guest's
// script complete, and nothing left behind. One guest boot.
func TestDemo(t *testing.T) {
	require.Long(t)
	cmd, out, outcomeFile := demoCommand(t)
	err := cmd.Run()
	t.Logf("demo output:\n%s", out)
	if err != nil {
		t.Errorf("demo: %v", err)
	}
	o := readOutcome(t, outcomeFile, out)
	if o.Err != "" {
		t.Errorf("demo error: %s", o.Err)
	}
	if o.Interactive || o.Held {
		t.Errorf("stdin is no terminal, yet the demo held the topology (interactive %v, held %v)", o.Interactive, o.Held)
	}
	if !o.GuestUp || o.Ring != "packed" {
		t.Errorf("guest up %v, ring %q: want up, packed", o.GuestUp, o.Ring)
	}
	if o.Ping.Transmitted != pings || o.Ping.Received != pings {
		t.Errorf("ping to the guest: %+v, want %d of %d", o.Ping, pings, pings)
	}
	if o.HostPing.Transmitted != 3 || o.HostPing.Received != 3 {
		t.Errorf("ping to the host's own address: %+v, want 3 of 3", o.HostPing)
	}
	for _, x := range []struct {
		name string
		t    transfer
	}{{"namespace -> guest", o.ToGuest}, {"guest -> namespace", o.FromGuest}} {
		if x.t.SentBytes != xferBytes || !x.t.ok() || len(x.t.SentSHA256) != 64 {
			t.Errorf("%s: %+v, want %d bytes, the sha256 received equal to the one sent", x.name, x.t, xferBytes)
		}
	}
	if !o.Ledger.balanced() || o.Ledger != balance(o.Stats) {
		t.Errorf("counters: %+v from %+v: want rx + flood copies + segment copies = tx + drops", o.Ledger, o.Stats)
	}
	// Both streams crossed both ports: each port sent at least a
	// stream's bytes (the switch counts frames, headers included).
	for _, p := range o.Stats {
		if p.TxBytes < xferBytes || p.RxBytes < xferBytes {
			t.Errorf("port %s: rx %d tx %d bytes, want at least %d each way", p.Name, p.RxBytes, p.TxBytes, xferBytes)
		}
	}
	if len(o.Stats) != 2 {
		t.Errorf("ports: %+v, want nic0 and vm1", o.Stats)
	}
	if !o.GuestCompleted {
		t.Errorf("the guest did not finish its script")
	}
	// It ran xvswitch with the README's command line (TestREADMEDemo
	// checks the README's) and printed the show commands' output.
	want := shellLine(filepath.Join(filepath.Dir(cmd.Path), "xvswitch"), switchArgs(o.NIC, o.Socket, o.Ctl)...)
	if o.SwitchCmd != want || !strings.Contains(out.String(), "\n$ "+want+"\n") {
		t.Errorf("xvswitch ran as %q, want %q, printed as such", o.SwitchCmd, want)
	}
	for _, s := range []string{"show ports --ctl", "NAME  KIND   STATE", "show stats --ctl", "csum_completed=", "show fdb --ctl", guestMAC + "  0     vm1   static", "demo done"} {
		if !strings.Contains(out.String(), s) {
			t.Errorf("demo output lacks %q", s)
		}
	}
	checkGone(t, o)
}

// TestDemoSIGTERM stops the demo with SIGTERM once xvswitch runs and QEMU
// boots, and checks it cleaned up everything and said it was stopped.
// QEMU is killed early in its boot.
func TestDemoSIGTERM(t *testing.T) {
	require.Long(t)
	cmd, out, outcomeFile := demoCommand(t)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.After(60 * time.Second)
	for !strings.Contains(out.String(), `msg="xvswitch running"`) {
		select {
		case err := <-exited:
			t.Fatalf("the demo exited before xvswitch ran: %v\n%s", err, out)
		case <-deadline:
			_ = cmd.Process.Kill()
			t.Fatalf("xvswitch never ran:\n%s", out)
		case <-time.After(50 * time.Millisecond):
		}
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	var err error
	select {
	case err = <-exited:
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("the demo did not exit within 60 s of SIGTERM:\n%s", out)
	}
	t.Logf("demo output:\n%s", out)
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 143 {
		t.Errorf("demo exit: %v, want exit status 143 (SIGTERM)", err)
	}
	if !strings.Contains(out.String(), "==> terminated: stopping") {
		t.Errorf("the demo did not say it was stopped")
	}
	o := readOutcome(t, outcomeFile, out)
	checkGone(t, o)
}
