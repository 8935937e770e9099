package main

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/xvswitch/xvswitch/test/netns"
	"github.com/xvswitch/xvswitch/test/qemu"
)

// options are the demo's flags.
type options struct {
	xvswitch    string // the binary, as `make build` leaves it
	ctl         string // xvswitch's control socket; "" for its default
	interactive bool   // stdin is a terminal: hold the topology until Ctrl-C
}

// Timeouts on two shared CPUs, the guest under TCG.
const (
	bootTimeout = 150 * time.Second // QEMU start to the guest listening
	xferTimeout = 120 * time.Second // one 2 MiB stream
	holdForever = 7 * 24 * time.Hour
)

// demo builds the topology, shows the traffic and the switch's view of it,
// and in a terminal holds it until Ctrl-C; o records what it saw. Teardown
// is the caller's (session.teardown), on every way out.
func demo(s *session, opt options, o *outcome) {
	if os.Geteuid() != 0 {
		s.Fatalf("the demo needs root (namespaces, XDP, AF_XDP, bpffs): run it as root (sudo make demo)")
	}
	for _, c := range []string{"ip", "ping", "qemu-system-x86_64"} {
		if _, err := exec.LookPath(c); err != nil {
			s.Fatalf("%s is not on PATH: make demo installs what the demo needs (scripts/install-deps demo)", c)
		}
	}
	if _, err := os.Stat(opt.xvswitch); err != nil {
		s.Fatalf("%v: build it first (make build)", err)
	}
	x := &xvswitch{bin: opt.xvswitch, ctl: opt.ctl}
	x.checkFree(s)
	o.Interactive = opt.interactive
	o.RunDir = s.dir

	s.step("xvswitch demo: namespace --veth-- [XDP + AF_XDP] xvswitch [vhost-user, client mode] -- QEMU guest")
	s.step("creating a namespace and a veth pair: the outer end plays the NIC")
	v := netns.NewVeth(s, netns.VethOptions{InnerAddr: nsAddr + "/24", OuterAddr: hostAddr + "/24", KeepOffload: true})
	v.NS.MustRun(s, "ip", "addr", "add", nsHostAddr+"/24", "dev", v.Inner)
	o.Namespace, o.NIC, o.NICPeer = v.NS.Name, v.Outer, v.Inner
	o.PinDir = filepath.Join("/sys/fs/bpf/xvswitch", v.Outer)
	s.indent(fmt.Sprintf("namespace %s: %s %s/24 (offloads at their defaults, as a container's)\n"+
		"host: %s, the NIC, with the host's own address %s/24", v.NS.Name, v.Inner, nsAddr, v.Outer, hostAddr))

	// The guest's upload has its listener before the guest can dial.
	fromGuest := receiveOne(s, v.NS, net.JoinHostPort(nsAddr, strconv.Itoa(portFromGuest)))

	hold := 3 * time.Minute // the demo releases the guest when it is done
	if opt.interactive {
		hold = holdForever
	}
	o.Socket = s.path("vm1.sock")
	g := prepareGuest(s, guestConfig(o.Socket, hold))
	s.step("starting QEMU (TCG): a guest whose virtio-net NIC listens on %s for xvswitch (server=on)", o.Socket)
	s.cmdline("qemu-system-x86_64", g.args...)
	g.start(s)
	o.PIDs = append(o.PIDs, g.proc.cmd.Process.Pid)
	waitSocket(s, g, o.Socket)

	s.step("starting xvswitch: XDP and AF_XDP on %s, a vhost-user port connecting to QEMU's socket", v.Outer)
	o.Ctl = x.ctlPath()
	args := switchArgs(v.Outer, o.Socket, opt.ctl)
	o.SwitchCmd = shellLine(x.bin, args...)
	x.start(s, args)
	o.PIDs = append(o.PIDs, x.proc.cmd.Process.Pid)

	s.step("waiting for the guest to boot")
	if !g.waitFor(s, bootTimeout, ready("from-ns")) {
		s.Fatalf("the guest did not come up within %v\n%s", bootTimeout, g.explain(s))
	}
	r := g.run()
	o.GuestUp = true
	o.Ring = "split"
	if r.HasFeature(0, qemu.VirtioFRingPacked) {
		o.Ring = "packed"
	}
	s.indent(fmt.Sprintf("guest up after %.1f s: %s %s, %s ring", time.Since(g.started).Seconds(), r.NIC(0).Ifname, guestAddr, o.Ring))

	s.step("ping: the namespace -> veth -> XDP/AF_XDP -> xvswitch -> vhost-user -> the guest, and back")
	o.Ping = ping(s, v.NS, pings, guestAddr)
	if o.Ping.Received != pings {
		s.Errorf("%d of %d pings answered", o.Ping.Received, pings)
	}

	s.step("TCP: %d bytes from the namespace to the guest, then %d back, sha256 compared", xferBytes, xferBytes)
	o.ToGuest = toGuest(s, v.NS, g)
	o.FromGuest = fromTheGuest(s, g, fromGuest)

	s.step("the host's own address on the NIC still answers: XDP leaves the host's traffic to its kernel")
	o.HostPing = ping(s, v.NS, 3, hostAddr)
	if o.HostPing.Received != 3 {
		s.Errorf("the host's own address %s: %d of 3 pings answered", hostAddr, o.HostPing.Received)
	}

	time.Sleep(300 * time.Millisecond) // the last bursts' counters settle
	s.step("what xvswitch saw")
	x.show(s, "show", "ports")
	x.show(s, "show", "stats")
	x.show(s, "show", "fdb")
	o.Stats = x.stats(s)
	for i := 0; i < 3 && !balance(o.Stats).balanced(); i++ {
		// A frame the namespace sent just now (IPv6 multicast comes
		// unasked) may be counted received and not yet sent: a real
		// imbalance stays, one in flight does not.
		time.Sleep(500 * time.Millisecond)
		o.Stats = x.stats(s)
	}
	o.Ledger = balance(o.Stats)
	l := o.Ledger
	verdict := "="
	if !l.balanced() {
		verdict = "!="
		s.Errorf("the switch's counters do not balance")
	}
	s.step("the switch's ledger: rx + flood copies + segment copies = tx + drops, every frame forwarded or dropped with a reason: %d + %d + %d %s %d + %d",
		l.Rx, l.FloodCopies, l.SegmentCopies, verdict, l.Tx, l.Drops)

	if opt.interactive {
		tryNext(s, x, o)
		o.Held = true
		select {
		case <-s.ctx.Done():
			fmt.Fprintln(s.out)
		case <-g.proc.exited:
			s.Errorf("QEMU exited while the topology was up: %v\n%s", g.proc.err, g.explain(s))
		case <-x.proc.exited:
			s.Errorf("xvswitch exited while the topology was up: %v (its log is above)", x.proc.err)
		}
		return
	}
	s.step("letting the guest power off")
	if err := poke(s.ctx, v.NS, net.JoinHostPort(guestAddr, strconv.Itoa(portHold))); err != nil {
		s.Errorf("releasing the guest: %v", err)
	}
	select {
	case <-g.proc.exited:
	case <-time.After(60 * time.Second):
		s.Errorf("the guest did not power off within 60 s")
	case <-s.ctx.Done():
	}
	o.GuestCompleted = g.run().Completed
	if !o.GuestCompleted {
		s.Errorf("the guest did not finish its script\n%s", g.explain(s))
	}
}

// waitSocket waits for QEMU to listen on its socket (server=on,wait=off
// makes it before the guest runs). xvswitch would wait too, retrying, but
// a QEMU that failed is better said here.
func waitSocket(s *session, g *guest, sock string) {
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := os.Stat(sock); err == nil {
			return
		}
		if !g.proc.running() {
			s.Fatalf("QEMU exited: %v\n%s", g.proc.err, g.explain(s))
		}
		if time.Now().After(deadline) {
			s.Fatalf("QEMU made no socket at %s within 20 s\n%s", sock, g.explain(s))
		}
		select {
		case <-s.ctx.Done():
			s.Fatalf("interrupted")
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// toGuest streams to the guest and compares what the guest says it got.
func toGuest(s *session, ns *netns.Namespace, g *guest) transfer {
	var t transfer
	var err error
	t.SentBytes, t.SentSHA256, err = sendTo(s.ctx, ns, net.JoinHostPort(guestAddr, strconv.Itoa(portToGuest)), xferBytes)
	if err != nil {
		s.Errorf("TCP to the guest: %v", err)
	}
	if !g.waitFor(s, xferTimeout, reported("from-ns")) {
		s.Errorf("the guest reported nothing of the stream\n%s", g.explain(s))
		return t
	}
	res := g.run().Result("from-ns")
	t.ReceivedBytes, t.ReceivedSHA256 = res.Bytes, res.SHA256
	s.indent(describe("namespace -> guest", t))
	if !t.ok() {
		s.Errorf("namespace -> guest: the stream did not arrive intact")
	}
	return t
}

// fromTheGuest waits for the guest's stream and compares it with what the
// guest says it sent.
func fromTheGuest(s *session, g *guest, got <-chan received) transfer {
	var t transfer
	var rcv received
	select {
	case rcv = <-got:
	case <-time.After(xferTimeout):
		rcv.err = fmt.Errorf("nothing within %v", xferTimeout)
	case <-s.ctx.Done():
		s.Fatalf("interrupted")
	}
	t.ReceivedBytes, t.ReceivedSHA256 = rcv.bytes, rcv.sha256
	if rcv.err != nil {
		s.Errorf("TCP from the guest: %v", rcv.err)
	}
	if g.waitFor(s, 30*time.Second, reported("to-ns")) {
		res := g.run().Result("to-ns")
		t.SentBytes, t.SentSHA256 = res.SentBytes, res.SentSHA256
	}
	s.indent(describe("guest -> namespace", t))
	if !t.ok() {
		s.Errorf("guest -> namespace: the stream did not arrive intact\n%s", g.explain(s))
	}
	return t
}

func describe(what string, t transfer) string {
	verdict := "match"
	if !t.ok() {
		verdict = "MISMATCH"
	}
	return fmt.Sprintf("%s: sent %d bytes sha256 %s\n%s  received %d bytes sha256 %s: %s",
		what, t.SentBytes, short(t.SentSHA256), strings.Repeat(" ", len(what)), t.ReceivedBytes, short(t.ReceivedSHA256), verdict)
}

// short is the head of a sha256, enough to compare by eye.
func short(sum string) string {
	if len(sum) > 16 {
		return sum[:16] + "..."
	}
	return sum
}
