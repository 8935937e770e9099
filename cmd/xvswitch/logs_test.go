package main

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/xvswitch/xvswitch/ctl"
	"github.com/xvswitch/xvswitch/vhost/vhosttest"
)

// logLine is one line of the daemon's --log-format json log.
type logLine map[string]any

func (l logLine) str(k string) string { s, _ := l[k].(string); return s }

// jsonLog parses a JSON log: every line must be an object with time,
// level and msg.
func jsonLog(t *testing.T, log []byte) []logLine {
	t.Helper()
	var lines []logLine
	for _, b := range bytes.Split(bytes.TrimSpace(log), []byte("\n")) {
		var l logLine
		if err := json.Unmarshal(b, &l); err != nil {
			t.Fatalf("log line is not JSON: %v\n%s", err, b)
		}
		if _, err := time.Parse(time.RFC3339Nano, l.str("time")); err != nil || l.str("level") == "" || l.str("msg") == "" {
			t.Fatalf("log line lacks time, level or msg: %s", b)
		}
		lines = append(lines, l)
	}
	return lines
}

func (d *runningDaemon) waitPortState(t *testing.T, name, state string) {
	t.Helper()
	vhosttest.WaitFor(t, name+" "+state, func() bool {
		var ports []ctl.PortInfo
		if err := json.Unmarshal([]byte(d.cli(t, "show", "ports", "--json")), &ports); err != nil {
			t.Fatal(err)
		}
		for _, p := range ports {
			if p.Name == name {
				return p.State == state
			}
		}
		return false
	})
}

// TestDaemonLogsPortEvents: --log-format json writes JSON lines, and a
// vhost port's life is one line per event, each with the port's name:
// added, a front-end connected, ready with the ring kind and features,
// another queue pair enabled, broken by its guest and why, a reconnection,
// disconnected when the port is removed, removed.
func TestDaemonLogsPortEvents(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "vm1.sock")
	d := startDaemon(t, "--log-format", "json", "--log-level", "debug", "--vhost", sock+",queues=2")
	f := vhosttest.Dial(t, sock)
	f.Start(vhosttest.Options{Packed: true, QueuePairs: 2})
	d.waitPortState(t, "vm1", "ready")
	// The guest puts a chain outside its memory on its first TX ring.
	if _, err := f.TxRing(0).Add(vhosttest.Buf{Addr: 0x1000, Len: 100}); err != nil {
		t.Fatal(err)
	}
	f.Kick(1)
	f.WaitClosed()
	d.waitPortState(t, "vm1", "broken")
	f.Reconnect() // the guest's QEMU restarted
	d.waitPortState(t, "vm1", "ready")
	d.cli(t, "del-port", "vm1")
	if err := d.stop(t); err != nil {
		t.Fatalf("daemon exit: %v", err)
	}

	lines := jsonLog(t, d.log.Bytes())
	var events []logLine
	for _, l := range lines {
		if l.str("port") == "vm1" {
			events = append(events, l)
		}
	}
	want := []string{
		"port added",
		"vhost front-end connected",
		"vhost device ready",
		"vhost queue pair enabled",
		"vhost device broken",
		"vhost front-end reconnected",
		"vhost device ready",
		"vhost queue pair enabled",
		"vhost front-end disconnected",
		"port removed",
	}
	var got []string
	for _, l := range events {
		if m := l.str("msg"); !strings.Contains(m, "in flight") { // a broken ring may say what it loses
			got = append(got, m)
		}
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("port events:\n%s\nwant:\n%s\nlog:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"), d.log)
	}
	for _, l := range events {
		switch l.str("msg") {
		case "vhost device ready":
			if l.str("ring") != "packed" || !strings.Contains(l.str("features"), "ring_packed") || !strings.Contains(l.str("features"), "mq") {
				t.Errorf("ready without the ring kind and features: %v", l)
			}
		case "vhost queue pair enabled":
			if l["queue_pair"] != 1.0 {
				t.Errorf("queue pair enabled: %v", l)
			}
		case "vhost device broken":
			if l.str("level") != "WARN" || !strings.Contains(l.str("err"), "address") {
				t.Errorf("broken without why: %v", l)
			}
		case "vhost front-end reconnected":
			if l["connection"] != 2.0 {
				t.Errorf("reconnected: %v", l)
			}
		}
	}
	if last := lines[len(lines)-1]; last.str("msg") != "xvswitch stopped" {
		t.Errorf("last line %v, want xvswitch stopped", last)
	}
}
