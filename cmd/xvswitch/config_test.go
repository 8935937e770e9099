package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/xvswitch/xvswitch/vswitch"
)

func TestParseRunFlagsAndFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "xvs.conf")
	os.WriteFile(file, []byte("# demo\nnic veth0,queues=2,trunk=10+20\nvhost /run/vm1.sock,mac=52:54:00:00:00:01,vlan=10\nworkers 2\n"), 0o644)
	cfg, err := parseRun([]string{"--config", file, "--vhost", "/run/vm2.sock,client", "--xconnect", "veth0=vm2", "--workers", "3", "--cpus", "0-1"})
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.NICs) != 1 || cfg.NICs[0].Queues != 2 || len(cfg.Vhosts) != 2 || cfg.Vhosts[1].Name != "vm2" || !cfg.Vhosts[1].Client {
		t.Fatalf("ports: %+v", cfg)
	}
	if cfg.Vhosts[0].Tag != 10 || len(cfg.NICs[0].Trunks) != 2 || cfg.NICs[0].Trunks[1] != 20 {
		t.Fatalf("VLAN settings from the file: %+v", cfg)
	}
	if cfg.Workers != 3 || len(cfg.CPUs) != 2 || len(cfg.XConnects) != 1 {
		t.Fatalf("flags did not override the file: %+v", cfg)
	}
	for _, bad := range [][]string{
		{"--xconnect", "a=b"},
		{"--nic", "eth0", "--nic", "eth0"},
		{"--nic", "eth0,mode=x"},
		{"stray"},
	} {
		if _, err := parseRun(bad); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
	os.WriteFile(file, []byte("colour blue\n"), 0o644)
	if _, err := parseRun([]string{"--config", file}); err == nil {
		t.Error("unknown config setting accepted")
	}
}

// The example config in the repository parses.
func TestExampleConfig(t *testing.T) {
	cfg, err := parseRun([]string{"--config", "../../examples/xvswitch.conf"})
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.NICs) != 1 || len(cfg.Vhosts) != 2 || cfg.Workers != 2 || len(cfg.CPUs) != 2 || cfg.Metrics == "" {
		t.Fatalf("%+v", cfg)
	}
	// Client mode is the one docs/vms.md recommends: it comes first.
	if !cfg.Vhosts[0].Client || cfg.Vhosts[1].Client {
		t.Errorf("want a client-mode port first, then a server-mode one: %+v", cfg.Vhosts)
	}
}

// TestConfigFileSyntax: comments on their own lines and after a setting,
// tabs and runs of spaces between a setting and its value; a # inside a
// value stays.
func TestConfigFileSyntax(t *testing.T) {
	file := filepath.Join(t.TempDir(), "xvs.conf")
	conf := "# xvswitch\n" +
		"\t# an indented comment\n" +
		"workers\t2 # two cores\n" +
		"cpus    0-1\t# pinned\n" +
		"  vhost\t\t/run/vm#1.sock,mac=52:54:00:00:00:01   \n" +
		"idle-after 5ms#not a comment\n" +
		"\n" +
		"--fdb-age 1m\n"
	os.WriteFile(file, []byte(conf), 0o644)
	_, err := parseRun([]string{"--config", file})
	if want := file + ":6: idle-after 5ms#not a comment: want a duration, like 10ms or 1s, or -1ns never to sleep"; err == nil || err.Error() != want {
		t.Fatalf("err %v, want %s", err, want)
	}
	os.WriteFile(file, []byte(strings.Replace(conf, "5ms#not a comment", "5ms # a comment", 1)), 0o644)
	cfg, err := parseRun([]string{"--config", file})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Workers != 2 || len(cfg.CPUs) != 2 || len(cfg.Vhosts) != 1 || cfg.Vhosts[0].Path != "/run/vm#1.sock" ||
		cfg.Vhosts[0].MAC != "52:54:00:00:00:01" || cfg.IdleAfter != 5*time.Millisecond || cfg.FDBAge != time.Minute {
		t.Fatalf("%+v", cfg)
	}
	for _, tc := range []struct{ conf, want string }{
		{"workers 2 3\n", ":1: workers 2 3: want a number of poll workers, 1..64"},
		{"colour blue\n", `:1: unknown setting "colour"`},
		{"worker 2\n", `:1: unknown setting "worker" (did you mean workers?)`},
		{"nic\n", ":1: nic needs a value: IFNAME[,queues=N][,mode=auto|copy|zerocopy][,csum=auto|fix|off][,maxmacs=N][,vlan=N][,trunk=N+M+...][,name=NAME]"},
		{"config /etc/other.conf\n", ":1: config: a config file cannot include another"},
	} {
		os.WriteFile(file, []byte(tc.conf), 0o644)
		if _, err := parseRun([]string{"--config", file}); err == nil || err.Error() != file+tc.want {
			t.Errorf("%q: err %v, want %s%s", tc.conf, err, file, tc.want)
		}
	}
}

// TestRxBackoffFlag: --rx-backoff defaults to vswitch.DefaultRxBackoff, 0
// turns the back-off off (vswitch.Config's negative), and a negative or
// malformed value is refused.
func TestRxBackoffFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want time.Duration
	}{
		{nil, vswitch.DefaultRxBackoff},
		{[]string{"--rx-backoff", "3us"}, 3 * time.Microsecond},
		{[]string{"--rx-backoff", "0"}, -1},
	} {
		cfg, err := parseRun(tc.args)
		if err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		if cfg.RxBackoff != tc.want {
			t.Errorf("%v: RxBackoff %v, want %v", tc.args, cfg.RxBackoff, tc.want)
		}
	}
	for _, bad := range []string{"-1us", "soon"} {
		if _, err := parseRun([]string{"--rx-backoff", bad}); err == nil {
			t.Errorf("--rx-backoff %s accepted", bad)
		}
	}
}
