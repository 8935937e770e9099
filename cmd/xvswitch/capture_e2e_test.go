package main

import (
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/xvswitch/xvswitch/test/netns"
	"github.com/xvswitch/xvswitch/test/require"
)

// TestCapturePing captures a ping across the switch on one of its NICs,
// where tcpdump on the interface would not see it (XDP redirects the
// frames to AF_XDP): two namespaces on two veth NICs of a running daemon,
// one pings the other. `capture nic1 -w FILE` until SIGINT holds the
// three echo requests (in) and replies (out), in order, and tcpdump -r
// reads them; `capture nic1 -w - -c 2 --direction out` piped into
// `tcpdump -r -` gives it two replies and ends by itself.
func TestCapturePing(t *testing.T) {
	require.Root(t)
	require.Commands(t, "ping", "tcpdump", "sysctl")
	const a, b = "10.96.0.1", "10.96.0.2"
	var vs []*netns.Veth
	for _, addr := range []string{a, b} {
		v := netns.NewVeth(t, netns.VethOptions{InnerAddr: addr + "/24"})
		// Nothing but the ping and ARP on the wire.
		v.NS.MustRun(t, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1")
		netns.MustRun(t, "sysctl", "-qw", "net.ipv6.conf."+v.Outer+".disable_ipv6=1")
		vs = append(vs, v)
	}
	d := startDaemon(t, "--nic", vs[0].Outer+",mode=copy,name=nic1", "--nic", vs[1].Outer+",mode=copy,name=nic2")
	ping := func(count string) {
		t.Helper()
		if out, err := vs[0].NS.Exec("ping", "-c", count, "-i", "0.2", "-W", "2", b).CombinedOutput(); err != nil {
			t.Fatalf("ping across the switch: %v\n%s\nstats: %+v", err, out, d.stats(t))
		}
	}
	// Resolve the neighbours first, and let the NICs' XDP programs learn
	// the MACs to steer (the first echo may go to the host's kernel before
	// they do): the capture then holds the echoes alone.
	for i := 0; vs[0].NS.Exec("ping", "-c", "1", "-W", "1", b).Run() != nil; i++ {
		if i == 5 {
			t.Fatalf("no ping across the switch: %+v", d.stats(t))
		}
	}

	file := filepath.Join(t.TempDir(), "nic1.pcap")
	capture := exec.Command(buildXvswitch(t), "capture", "nic1", "-w", file, "--ctl", d.ctl)
	rest := startCapture(t, capture)
	ping("3")
	if err := capture.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	summary, _ := io.ReadAll(rest)
	if err := capture.Wait(); err != nil || !strings.HasPrefix(string(summary), "6 packets captured\n0 packets dropped") {
		t.Fatalf("capture after SIGINT: %v\n%s", err, summary)
	}
	out, err := exec.Command("tcpdump", "-n", "-r", file).CombinedOutput()
	if err != nil {
		t.Fatalf("tcpdump -r: %v\n%s", err, out)
	}
	var echoes []string
	for _, line := range strings.Split(string(out), "\n") {
		if _, what, ok := strings.Cut(line, " IP "); ok {
			what, _, _ = strings.Cut(what, ", id ")
			echoes = append(echoes, what)
		}
	}
	req, rep := a+" > "+b+": ICMP echo request", b+" > "+a+": ICMP echo reply"
	if want := []string{req, rep, req, rep, req, rep}; strings.Join(echoes, "\n") != strings.Join(want, "\n") {
		t.Fatalf("tcpdump -r %s:\n%s\nwant the echoes\n%s", file, out, strings.Join(want, "\n"))
	}

	// -w - into tcpdump -r -, stopped by -c.
	capture = exec.Command(buildXvswitch(t), "capture", "nic1", "-w", "-", "-c", "2", "--direction", "out", "--ctl", d.ctl)
	tcpdump := exec.Command("tcpdump", "-n", "-r", "-")
	if tcpdump.Stdin, err = capture.StdoutPipe(); err != nil {
		t.Fatal(err)
	}
	var dumped strings.Builder
	tcpdump.Stdout, tcpdump.Stderr = &dumped, &dumped
	rest = startCapture(t, capture)
	if err := tcpdump.Start(); err != nil {
		t.Fatal(err)
	}
	defer tcpdump.Process.Kill()
	ping("3")
	summary, _ = io.ReadAll(rest)
	if err := capture.Wait(); err != nil || !strings.HasPrefix(string(summary), "2 packets captured\n") {
		t.Fatalf("capture -c 2: %v\n%s", err, summary)
	}
	if err := tcpdump.Wait(); err != nil || strings.Count(dumped.String(), rep) != 2 {
		t.Fatalf("tcpdump -r - of capture -w - -c 2 --direction out: %v\n%s", err, dumped.String())
	}
}
