package main

import "testing"

// TestParseRunGen: --gen adds a benchmark generator port whose name can be
// cross-connected; a bad spec is refused.
func TestParseRunGen(t *testing.T) {
	cfg, err := parseRun([]string{"--vhost", "/run/vm.sock,name=vm", "--gen", "g0,size=1518,dst=02:00:00:00:00:01", "--xconnect", "g0=vm"})
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Gens) != 1 || cfg.Gens[0].Name != "g0" || cfg.Gens[0].Size != 1518 || cfg.Gens[0].Dst != "02:00:00:00:00:01" {
		t.Fatalf("gens: %+v", cfg.Gens)
	}
	for _, bad := range [][]string{
		{"--gen", "g0,size=10,dst=02:00:00:00:00:01"},
		{"--gen", "g0"},
		{"--gen", "vm,dst=02:00:00:00:00:01", "--vhost", "/run/vm.sock,name=vm"},
	} {
		if _, err := parseRun(bad); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}
