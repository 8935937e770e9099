package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/xvswitch/xvswitch/ctl"
)

// TestShowStatsLearnRefused: a port's refused learning is printed under
// it, apart from its drops (the frames were forwarded), and only when
// there was some.
func TestShowStatsLearnRefused(t *testing.T) {
	resp := ctl.Response{Stats: []ctl.PortCounters{
		{Name: "evil", RxPackets: 100, Drops: map[string]uint64{"spoofed_source": 3}, LearnRefused: 36},
		{Name: "quiet"},
	}}
	var b strings.Builder
	if err := printShow(&b, "stats", resp, false); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if !strings.Contains(out, "spoofed_source=3") || !strings.Contains(out, "learn_refused=36") {
		t.Errorf("missing counters in\n%s", out)
	}
	if n := strings.Count(out, "learn_refused"); n != 1 {
		t.Errorf("learn_refused printed %d times, want once (evil only):\n%s", n, out)
	}
}

// TestShowStatsFloodCopies: flood copies have a column of their own, per
// port and per queue, so the table balances as the JSON does.
func TestShowStatsFloodCopies(t *testing.T) {
	resp := ctl.Response{Stats: []ctl.PortCounters{{
		Name: "nic0", RxPackets: 10, TxPackets: 25, FloodCopies: 17, Drops: map[string]uint64{"tx_full": 2},
		Kernel: map[string]uint64{"xdp_redirect": 10},
		Queues: []ctl.QueueCounters{{Queue: 0, RxPackets: 4, FloodCopies: 7}, {Queue: 1, RxPackets: 6, FloodCopies: 10}},
	}}}
	var b strings.Builder
	if err := printShow(&b, "stats", resp, false); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	want := [][]string{
		{"PORT", "QUEUE", "RX", "PKTS", "RX", "BYTES", "TX", "PKTS", "TX", "BYTES", "FLOOD", "DROPS"},
		{"nic0", "*", "10", "0", "25", "0", "17", "tx_full=2"},
		{"kernel", "xdp_redirect=10"},
		{"0", "4", "0", "0", "0", "7", "0"},
		{"1", "6", "0", "0", "0", "10", "0"},
	}
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), len(want), b.String())
	}
	for i, l := range lines {
		if got := strings.Fields(l); strings.Join(got, " ") != strings.Join(want[i], " ") {
			t.Errorf("line %d: %q, want fields %q", i, l, want[i])
		}
	}
	// No bursts counted, no bursts line.
	if strings.Contains(b.String(), "bursts") {
		t.Errorf("a bursts line without bursts:\n%s", b.String())
	}
	// The kernel's counters sit in the DROPS column, as the drops do.
	if col := strings.Index(lines[0], "DROPS"); strings.Index(lines[2], "xdp_redirect") != col || strings.Index(lines[1], "tx_full") != col {
		t.Errorf("columns misaligned:\n%s", b.String())
	}
}

// fakeCtl serves a control socket with h, a stand-in daemon, until the
// test ends, and returns its path once it listens.
func fakeCtl(t *testing.T, h ctl.Handler) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "ctl.sock")
	ctx, cancel := context.WithCancel(context.Background())
	ready, done := make(chan struct{}), make(chan error, 1)
	go func() { done <- ctl.ServeWith(ctx, sock, h, ctl.Options{Ready: func() { close(ready) }}) }()
	t.Cleanup(func() { cancel(); <-done })
	select {
	case <-ready:
		return sock
	case err := <-done:
		t.Fatalf("the stand-in daemon's socket: %v", err)
		return ""
	}
}

// TestShowWorkersCLI: `show workers` prints a row per worker, its CPU or
// a dash, its queues and busy share; --json is the wire's rows.
func TestShowWorkersCLI(t *testing.T) {
	rows := []ctl.WorkerInfo{
		{ID: 0, CPU: 2, Queues: []string{"nic0/0", "vm1/0"}, Sleeps: 41, RunningNs: 4e9, IdleNs: 3e9, BusyPercent: 25},
		{ID: 1, CPU: -1, Queues: []string{}, Sleeps: 7, BusyPercent: 0.5},
	}
	sock := fakeCtl(t, func(req ctl.Request) ctl.Response {
		if req.Op != ctl.OpShowWorkers {
			return ctl.Response{Error: "unexpected " + req.Op}
		}
		return ctl.Response{Workers: rows}
	})
	var out, errOut strings.Builder
	if code := cli([]string{"show", "workers", "--ctl", sock}, &out, &errOut); code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	want := "WORKER  CPU  SLEEPS  BUSY   QUEUES\n" +
		"0       2    41      25.0%  nic0/0 vm1/0\n" +
		"1       -    7       0.5%   -\n"
	if out.String() != want {
		t.Errorf("got\n%s\nwant\n%s", out.String(), want)
	}
	out.Reset()
	if code := cli([]string{"show", "workers", "--json", "--ctl", sock}, &out, &errOut); code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	var got []ctl.WorkerInfo
	if err := json.Unmarshal([]byte(out.String()), &got); err != nil || len(got) != 2 || got[0].IdleNs != 3e9 || got[0].Queues[1] != "vm1/0" {
		t.Fatalf("json %v: %s", err, out.String())
	}
}

// TestClearStatsCLI: `clear stats` sends clear-stats and prints nothing;
// anything else to clear is a usage error that sends nothing.
func TestClearStatsCLI(t *testing.T) {
	var ops []string
	var mu sync.Mutex
	sock := fakeCtl(t, func(req ctl.Request) ctl.Response {
		mu.Lock()
		defer mu.Unlock()
		ops = append(ops, req.Op)
		return ctl.Response{}
	})
	var out, errOut strings.Builder
	if code := cli([]string{"clear", "stats", "--ctl", sock}, &out, &errOut); code != exitOK || out.Len() != 0 {
		t.Fatalf("exit %d, out %q: %s", code, out.String(), errOut.String())
	}
	for _, args := range [][]string{{"clear"}, {"clear", "stat"}, {"clear", "fdb"}, {"clear", "stats", "ports"}} {
		errOut.Reset()
		if code := cli(append(args, "--ctl", sock), &out, &errOut); code != exitUsage {
			t.Errorf("%q: exit %d, want %d", args, code, exitUsage)
		}
		if args[len(args)-1] == "stat" && !strings.Contains(errOut.String(), "did you mean stats?") {
			t.Errorf("%q: no suggestion: %s", args, errOut.String())
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(ops) != 1 || ops[0] != ctl.OpClearStats {
		t.Fatalf("ops sent: %q", ops)
	}
}

// TestShowWorkersAndClearDaemon: a running daemon's workers list the
// queues they poll, and clear stats answers.
func TestShowWorkersAndClearDaemon(t *testing.T) {
	d := startDaemon(t, "--workers", "2", "--vhost", filepath.Join(t.TempDir(), "vm1.sock")+",queues=2")
	var ws []ctl.WorkerInfo
	if err := json.Unmarshal([]byte(d.cli(t, "show", "workers", "--json")), &ws); err != nil {
		t.Fatal(err)
	}
	if len(ws) != 2 || strings.Join(ws[0].Queues, " ") != "vm1/0" || strings.Join(ws[1].Queues, " ") != "vm1/1" || ws[0].RunningNs <= 0 {
		t.Fatalf("workers: %+v", ws)
	}
	if out := d.cli(t, "show", "workers"); !strings.HasPrefix(out, "WORKER") || !strings.Contains(out, "vm1/1") {
		t.Fatalf("show workers:\n%s", out)
	}
	if out := d.cli(t, "clear", "stats"); out != "" {
		t.Fatalf("clear stats printed %q", out)
	}
	if out := d.cli(t, "show", "stats"); !strings.Contains(out, "FLOOD") {
		t.Fatalf("show stats:\n%s", out)
	}
}

// TestShowStatsBursts: a port's bursts are printed under it with the
// frames per burst they mean, which tell who set the pace.
func TestShowStatsBursts(t *testing.T) {
	resp := ctl.Response{Stats: []ctl.PortCounters{{
		Name: "vm1", RxPackets: 640, TxPackets: 90, Bursts: ctl.Bursts{RxBursts: 20, TxBursts: 30},
	}}}
	var b strings.Builder
	if err := printShow(&b, "stats", resp, false); err != nil {
		t.Fatal(err)
	}
	want := "rx_bursts=20 (32.0 frames each) tx_bursts=30 (3.0 frames each)"
	if !strings.Contains(b.String(), want) {
		t.Errorf("want %q in\n%s", want, b.String())
	}
}
