package vhost_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/xvswitch/xvswitch/vhost"
	"github.com/xvswitch/xvswitch/vhost/vhosttest"
)

// TestEventLog: a device's log has one line per event: connected, ready
// with the ring kind and features, another queue pair enabled and
// disabled, disconnected (its Stopped says nothing of its own), a
// reconnection numbered.
func TestEventLog(t *testing.T) {
	var buf bytes.Buffer
	d, err := vhost.Open(vhost.Config{Name: "vm", QueuePairs: 2, Logger: slog.New(slog.NewJSONHandler(&buf, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	f := vhosttest.Connect(t, d)
	f.Start(vhosttest.Options{QueuePairs: 2})
	f.MustAck(vhosttest.ReqSetVringEnable, vhosttest.VringState(3, 0))
	f.Reconnect()
	f.Close()

	var got []string
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var l map[string]any
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Fatalf("%v: %s", err, line)
		}
		s := l["msg"].(string)
		for _, k := range []string{"ring", "features", "queue_pair", "connection", "err"} {
			if v, ok := l[k]; ok {
				s += " " + k + "=" + strings.Trim(string(must(json.Marshal(v))), `"`)
			}
		}
		got = append(got, s)
	}
	want := []string{
		"vhost front-end connected",
		"vhost device ready ring=split features=mrg_rxbuf,mq,event_idx,protocol_features,version_1",
		"vhost queue pair enabled queue_pair=1",
		"vhost queue pair disabled queue_pair=1",
		"vhost front-end disconnected",
		"vhost front-end reconnected connection=2",
		"vhost device ready ring=split features=mrg_rxbuf,mq,event_idx,protocol_features,version_1",
		"vhost queue pair enabled queue_pair=1",
		"vhost front-end disconnected",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("log:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestEventLogChurn: a front-end that connects and breaks the same way
// twenty times in a row (QEMU reconnecting with a setup the port refuses)
// gets its first three sessions logged in full, then one summary line for
// the rest, and is logged in full again once a session gets to ready.
func TestEventLogChurn(t *testing.T) {
	var buf bytes.Buffer
	d, err := vhost.Open(vhost.Config{Name: "vm", QueuePairs: 1, Logger: slog.New(slog.NewJSONHandler(&buf, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for i := 0; i < 20; i++ {
		f := vhosttest.Connect(t, d)
		_ = f.SendMsg(vhosttest.ReqSetVringEnable, 0, vhosttest.VringState(5, 1)) // no such queue, and no protocol features
		_ = f.WaitClosed()
		f.Close()
	}
	f := vhosttest.Connect(t, d)
	f.Start(vhosttest.Options{QueuePairs: 1})
	f.Close()

	var got []string
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var l map[string]any
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Fatalf("%v: %s", err, line)
		}
		s := l["msg"].(string)
		for _, k := range []string{"connection", "sessions"} {
			if v, ok := l[k]; ok {
				s += " " + k + "=" + string(must(json.Marshal(v)))
			}
		}
		got = append(got, s)
	}
	const held = "vhost front-end keeps reconnecting and failing the same way; its sessions' lines were held back"
	want := []string{
		"vhost front-end connected",
		"vhost device broken",
		"vhost front-end reconnected connection=2",
		"vhost device broken",
		"vhost front-end reconnected connection=3",
		"vhost device broken",
		held + " sessions=17",
		"vhost front-end reconnected connection=21",
		"vhost device ready",
		"vhost front-end disconnected",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("log:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
