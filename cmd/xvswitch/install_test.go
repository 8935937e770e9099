package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/xvswitch/xvswitch/test/require"
)

// TestMakeInstall runs `make install` into a DESTDIR with the binary under
// test: the binary, the unit with its paths rewritten for PREFIX and
// SYSCONFDIR, and the example config, which a second install leaves as
// the administrator edited it.
func TestMakeInstall(t *testing.T) {
	require.Commands(t, "make", "install", "sed")
	bin := buildXvswitch(t)
	dest := t.TempDir()
	install := func() string {
		t.Helper()
		cmd := exec.Command("make", "--no-print-directory", "-C", "../..", "-o", "build", "install",
			"DESTDIR="+dest, "PREFIX=/opt/xvs", "SYSCONFDIR=/etc/xvs", "BIN="+bin)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("make install: %v\n%s", err, out)
		}
		return string(out)
	}
	install()
	for path, mode := range map[string]os.FileMode{
		"opt/xvs/bin/xvswitch":                        0o755,
		"opt/xvs/lib/systemd/system/xvswitch.service": 0o644,
		"etc/xvs/xvswitch.conf":                       0o644,
	} {
		fi, err := os.Stat(filepath.Join(dest, path))
		if err != nil || fi.Mode().Perm() != mode {
			t.Errorf("%s: %v %v, want mode %v", path, fi, err, mode)
		}
	}
	unit, err := os.ReadFile(filepath.Join(dest, "opt/xvs/lib/systemd/system/xvswitch.service"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(unit), "\nExecStart=/opt/xvs/bin/xvswitch run --config /etc/xvs/xvswitch.conf\n") {
		t.Errorf("installed unit's ExecStart not rewritten:\n%s", unit)
	}
	example, _ := os.ReadFile("../../examples/xvswitch.conf")
	conf := filepath.Join(dest, "etc/xvs/xvswitch.conf")
	if got, _ := os.ReadFile(conf); string(got) != string(example) {
		t.Errorf("installed config is not the example")
	}
	edited := "nic eth7\n"
	if err := os.WriteFile(conf, []byte(edited), 0o600); err != nil {
		t.Fatal(err)
	}
	if out := install(); !strings.Contains(out, "keeping "+conf) {
		t.Errorf("second install does not say it keeps the config:\n%s", out)
	}
	if got, _ := os.ReadFile(conf); string(got) != edited {
		t.Errorf("second install overwrote the config: %q", got)
	}
}
