package main

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/help-*.txt from the current help texts")

// runCLI runs a command line in this process, as main does.
func runCLI(args ...string) (code int, stdout, stderr string) {
	var out, errOut bytes.Buffer
	code = cli(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// TestHelp: every way of asking for help exits 0 with the one text of
// that command on stdout (testdata/help-*.txt, which README quotes), and
// options are written --name.
func TestHelp(t *testing.T) {
	check := func(golden, got string) {
		t.Helper()
		path := filepath.Join("testdata", golden)
		if *update {
			if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if got != string(want) {
			t.Errorf("%s differs (go test -run TestHelp -update rewrites it); got:\n%s", golden, got)
		}
	}
	for _, args := range [][]string{{"--help"}, {"-h"}, {"help"}} {
		code, out, errOut := runCLI(args...)
		if code != 0 || errOut != "" {
			t.Errorf("%v: exit %d, stderr %q", args, code, errOut)
		}
		check("help.txt", out)
	}
	for _, c := range commands {
		for _, args := range [][]string{{"help", c.name}, {c.name, "--help"}, {c.name, "-h"}} {
			code, out, errOut := runCLI(args...)
			if code != 0 || errOut != "" {
				t.Errorf("%v: exit %d, stderr %q", args, code, errOut)
			}
			check("help-"+c.name+".txt", out)
			for _, line := range strings.Split(out, "\n") {
				if f := strings.Fields(line); len(f) > 0 && strings.HasPrefix(f[0], "-") && !strings.HasPrefix(f[0], "--") {
					t.Errorf("%v: option written with one dash: %q", args, line)
				}
			}
		}
	}
	// --help wins wherever it is, even after a bad value.
	if code, out, _ := runCLI("run", "--workers", "x", "--help"); code != 0 || !strings.HasPrefix(out, "usage: xvswitch run") {
		t.Errorf("run --workers x --help: exit %d\n%s", code, out)
	}
	// No command: the overview, on stderr, exit 2.
	if code, out, errOut := runCLI(); code != 2 || out != "" || !strings.HasPrefix(errOut, "xvswitch: a userspace virtual switch") {
		t.Errorf("no arguments: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

// TestBadArguments: a bad command line prints one line naming the
// argument and what it accepts, then a hint to --help, and exits 2.
func TestBadArguments(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string // the first line of stderr
	}{
		{[]string{"run", "--workers", "100"}, "xvswitch run: --workers 100: want a number of poll workers, 1..64"},
		{[]string{"run", "--workers=two"}, "xvswitch run: --workers two: want a number of poll workers, 1..64"},
		{[]string{"run", "--cpus", "3-1"}, "xvswitch run: --cpus 3-1: bad cpu list: want CPU numbers and ascending ranges, such as 2-3 or 0,2,4"},
		{[]string{"run", "--nic", "eth0,mode=warp"}, `xvswitch run: --nic eth0,mode=warp: bad port spec: mode="warp": want auto, copy or zerocopy`},
		{[]string{"run", "--vhost", "/run/vm.sock,colour=red"}, `xvswitch run: --vhost /run/vm.sock,colour=red: bad port spec: unknown option "colour": want client, queues=N, mac=MAC, spoof=allow|drop, maxmacs=N, offloads=on|off, own=IFNAME:Q[+Q], vlan=N, trunk=N+M+..., name=NAME, mode=OCTAL or group=NAME|GID`},
		{[]string{"run", "--nics", "eth0"}, "xvswitch run: unknown option --nics (did you mean --nic?)"},
		{[]string{"run", "--vhost"}, "xvswitch run: --vhost needs a value: PATH[,client][,queues=N][,mac=MAC][,spoof=allow][,maxmacs=N][,offloads=off][,own=IFNAME:Q[+Q]][,vlan=N][,trunk=N+M+...][,name=NAME][,mode=0660][,group=kvm]"},
		{[]string{"run", "--fdb-age", "0"}, "xvswitch run: --fdb-age 0: want a duration above zero, like 300s or 5m"},
		{[]string{"run", "--metrics", "9417"}, "xvswitch run: --metrics 9417: want HOST:PORT, like 127.0.0.1:9417 (or :9417 for every address)"},
		{[]string{"run", "--log-level", "loud"}, "xvswitch run: --log-level loud: want debug, info, warn or error"},
		{[]string{"run", "--log-format", "xml"}, "xvswitch run: --log-format xml: want text or json"},
		{[]string{"run", "--vhost", "/run/a.sock", "--xconnect", "a=b"}, `xvswitch run: bad configuration: --xconnect a=b: no port named "b"`},
		{[]string{"run", "stray"}, `xvswitch run: unexpected argument "stray": run takes only options`},
		{[]string{"run", "--config", "/nonexistent/xvswitch.conf"}, "xvswitch run: --config: open /nonexistent/xvswitch.conf: no such file or directory"},
		{[]string{"show"}, "xvswitch show: show what? want ports, fdb, stats or workers"},
		{[]string{"show", "prots"}, `xvswitch show: cannot show "prots": want ports, fdb, stats or workers (did you mean ports?)`},
		{[]string{"show", "ports", "--json=maybe"}, "xvswitch show: --json=maybe: want --json, --json=true or --json=false"},
		{[]string{"add-port"}, "xvswitch add-port: add-port adds one port: give one --nic SPEC or one --vhost SPEC"},
		{[]string{"add-port", "--vhost", "/run/vm.sock,queues=0"}, `xvswitch add-port: --vhost /run/vm.sock,queues=0: bad port spec: queues="0": want 1..256`},
		{[]string{"del-port"}, "xvswitch del-port: del-port takes one port name, as 'xvswitch show ports' lists it"},
		{[]string{"capture"}, "xvswitch capture: capture takes one port name, as 'xvswitch show ports' lists it"},
		{[]string{"capture", "vm1", "-c", "0"}, "xvswitch capture: --count 0: want a number of frames, 1 or more"},
		{[]string{"capture", "vm1", "--direction", "inout"}, "xvswitch capture: --direction inout: want in, out or both"},
		{[]string{"capture", "vm1", "-w"}, "xvswitch capture: --write needs a value: FILE"},
		{[]string{"help", "shwo"}, `xvswitch help: unknown command "shwo": want run, show, clear, capture, add-port, del-port, version or help (did you mean show?)`},
	} {
		code, out, errOut := runCLI(tc.args...)
		hint := "See 'xvswitch " + tc.args[0] + " --help'.\n"
		if code != 2 || out != "" || errOut != tc.want+"\n"+hint {
			t.Errorf("%v: exit %d, stdout %q, stderr:\n%s\nwant exit 2, stderr:\n%s\n%s", tc.args, code, out, errOut, tc.want, hint)
		}
	}
	if code, _, errOut := runCLI("shwo", "ports"); code != 2 || errOut != "xvswitch: unknown command \"shwo\": want run, show, clear, capture, add-port, del-port, version or help (did you mean show?)\nSee 'xvswitch --help'.\n" {
		t.Errorf("unknown command: exit %d, stderr %q", code, errOut)
	}
}

// TestRunChecksTheHost: the daemon refuses a NIC this host does not have,
// naming the ones it has, and CPUs it may not run on.
func TestRunChecksTheHost(t *testing.T) {
	code, _, errOut := runCLI("run", "--nic", "doesnotexist", "--ctl", filepath.Join(t.TempDir(), "ctl.sock"))
	first, _, _ := strings.Cut(errOut, "\n")
	if code != 2 || !strings.HasPrefix(first, `xvswitch run: --nic doesnotexist: no network interface "doesnotexist" here; there are `) || !strings.Contains(first, "lo") {
		t.Errorf("exit %d, stderr:\n%s", code, errOut)
	}
	code, _, errOut = runCLI("run", "--cpus", "4095", "--ctl", filepath.Join(t.TempDir(), "ctl.sock"))
	if first, _, _ := strings.Cut(errOut, "\n"); code != 2 || !strings.HasPrefix(first, "xvswitch run: --cpus 4095: CPU 4095 is not one this process may run on; it may use 0") {
		t.Errorf("exit %d, stderr:\n%s", code, errOut)
	}
}
