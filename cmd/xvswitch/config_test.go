package main

import (
	"os"
	"path/filepath"
	"testing"
)

func TestParseRunFlagsAndFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "xvs.conf")
	os.WriteFile(file, []byte("# demo\nnic veth0,queues=2\nvhost /run/vm1.sock,mac=52:54:00:00:00:01\nworkers 2\n"), 0o644)
	cfg, err := parseRun([]string{"--config", file, "--vhost", "/run/vm2.sock,client", "--xconnect", "veth0=vm2", "--workers", "3", "--cpus", "0-1"})
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.NICs) != 1 || cfg.NICs[0].Queues != 2 || len(cfg.Vhosts) != 2 || cfg.Vhosts[1].Name != "vm2" || !cfg.Vhosts[1].Client {
		t.Fatalf("ports: %+v", cfg)
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
}
