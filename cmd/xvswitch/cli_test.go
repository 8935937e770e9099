package main

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/xvswitch/xvswitch/ctl"
)

// TestCLIAddDelPort drives a running daemon through its CLI: ports added
// and removed at run time show up in `show ports` (table and JSON), a
// removed vhost port's socket file is gone, and errors are reported.
func TestCLIAddDelPort(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	metrics := l.Addr().String()
	l.Close()
	d := startDaemon(t, "--metrics", metrics)
	dir := t.TempDir()
	a, b := filepath.Join(dir, "vm-a.sock"), filepath.Join(dir, "vm-b.sock")
	d.cli(t, "add-port", "--vhost", a+",mac=52:54:00:00:0a:01,mode=0640,vlan=10")
	d.cli(t, "add-port", "--vhost", b+",queues=2,name=second")
	var ports []ctl.PortInfo
	if err := json.Unmarshal([]byte(d.cli(t, "show", "ports", "--json")), &ports); err != nil {
		t.Fatal(err)
	}
	if len(ports) != 2 || ports[0].Name != "vm-a" || ports[1].Name != "second" || ports[1].Queues != 2 || ports[0].Kind != "vhost" ||
		ports[0].VLAN != "vlan=10" || ports[1].VLAN != "" {
		t.Fatalf("ports: %+v", ports)
	}
	if out := d.cli(t, "show", "ports"); !strings.Contains(out, "second") || !strings.Contains(out, "waiting") {
		t.Fatalf("show ports:\n%s", out)
	}
	// The configured MAC is a static FDB entry, in the port's VLAN.
	if out := d.cli(t, "show", "fdb"); !regexp.MustCompile(`52:54:00:00:0a:01 +10 +vm-a +static`).MatchString(out) {
		t.Fatalf("show fdb:\n%s", out)
	}
	if fi, err := os.Stat(a); err != nil || fi.Mode().Perm() != 0o640 {
		t.Fatalf("socket file: %v %v", fi.Mode(), err)
	}
	// The Prometheus endpoint has a series per port queue and drop reason.
	resp, err := http.Get("http://" + metrics + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`xvswitch_rx_packets_total{port="vm-a",queue="0"} 0`,
		`xvswitch_tx_packets_total{port="second",queue="1"} 0`,
		`xvswitch_drops_total{port="second",queue="0",reason="no_rx_buffers"} 0`,
		"xvswitch_fdb_entries 1",
		"# TYPE xvswitch_drops_total counter",
		// Waiting for their front-ends: not up.
		`xvswitch_port_up{port="vm-a"} 0`,
		`xvswitch_port_info{kind="vhost",port="second",state="waiting"} 1`,
		`xvswitch_build_info{commit=`,
		"# TYPE process_start_time_seconds gauge",
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("metrics lack %q:\n%s", want, body)
		}
	}
	d.cli(t, "del-port", "vm-a")
	if _, err := os.Stat(a); err == nil {
		t.Fatalf("%s still exists after del-port", a)
	}
	if out := d.cli(t, "show", "fdb", "--json"); strings.Contains(out, "0a:01") {
		t.Fatalf("FDB keeps a deleted port's MAC: %s", out)
	}
	for _, bad := range [][]string{
		{"del-port", "vm-a"},
		{"add-port", "--vhost", b + ",name=second"},
		{"add-port", "--nic", "eth0,mode=warp"},
		{"show", "colours"},
	} {
		out, err := exec.Command(buildXvswitch(t), append(bad, "--ctl", d.ctl)...).CombinedOutput()
		if err == nil {
			t.Errorf("xvswitch %v succeeded:\n%s", bad, out)
		}
	}
	if err := d.stop(t); err != nil {
		t.Fatalf("daemon exit: %v\n%s", err, d.log)
	}
	if _, err := os.Stat(b); err == nil {
		t.Fatalf("%s left behind after SIGTERM", b)
	}
}
