package main

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/xvswitch/xvswitch/ctl"
	"github.com/xvswitch/xvswitch/test/netns"
	"github.com/xvswitch/xvswitch/test/testpmd"
)

// This file starts the pieces every scenario is made of, always on the
// same CPUs (the machine has two; see placement):
//   - the switching process under test, all its threads on switchCPU:
//     xvswitch (one worker), or DPDK testpmd (main and forwarding lcore);
//   - the "guest": a DPDK testpmd with virtio-user ports, all on guestCPU;
//   - on the wire side (NIC -> VM), a generator in the namespace, on
//     -gen-cpu: by default the switch's CPU. On the guest's CPU it starves
//     the guest, which then empties its ring a few times a second, and
//     both systems measure only that; on the switch's CPU the switch gets
//     half a core and the rate says how well it uses it.

const (
	switchCPU = 1
	guestCPU  = 0
)

// placement is recorded with every result.
func placement(runtimeCPUs string, keepBusy bool) string {
	control := "their control threads on CPU " + runtimeCPUs + " (xvswitch's Go runtime, by its process mask; DPDK's go to CPUs without lcores, CPU 0)"
	if runtimeCPUs == "" {
		control = "their control threads unpinned (xvswitch's Go runtime, which may share the worker's CPU; DPDK's go to CPUs without lcores, CPU 0)"
	}
	return "switch data path on CPU 1 (xvswitch: its one worker thread; DPDK: forwarding lcore, and main lcore); " + control + "; " +
		"guest testpmd (virtio-user; main + forwarding lcore) and latency prober on CPU 0; NIC -> VM's wire-side generator (worker) on CPU 1 with the switch. " +
		"Each run records every thread's allowed CPUs (switch_threads, guest_threads in the JSON) and, for the switch, where each thread last ran and its CPU time in the window (switch_placement)" + busyNote(keepBusy)
}

func busyNote(keepBusy bool) string {
	if !keepBusy {
		return ""
	}
	return ". A SCHED_IDLE spinner on each of CPUs 0 and 1 for the whole bench (-keep-cpus-busy), so that neither vCPU halts (spin.go)"
}

// MACs of the guests' ports.
const (
	guestMAC0 = "02:00:00:00:aa:01"
	guestMAC1 = "02:00:00:00:aa:02"
)

// wireSinkMAC is where VM -> NIC's frames go: a MAC nobody in the
// namespace has, so that its stack drops them as soon as they arrive
// (PACKET_OTHERHOST). Addressed to the veth's own MAC, every frame was
// routed first, and in the worker's profile 85-90% of its time went to
// the namespace's stack on its CPU (ip_route_input_slow, dst_destroy and
// their RCU callbacks, 2026-12-03): veth runs the receiver's stack on the
// sender's CPU, a real NIC does not.
const wireSinkMAC = "02:00:00:00:ee:01"

// xvsDaemon is a running `xvswitch run`.
type xvsDaemon struct {
	*proc
	ctl string
}

// startXvswitch runs xvswitch with one worker pinned to cpu (--cpus),
// and waits until its control socket answers (its ports exist by then).
// With -runtime-cpus the process starts with that affinity (taskset), so
// the Go runtime's threads (vhost-user messages, the control socket, the
// Notifier, the garbage collector) run there and never on the worker's
// CPU: the worker's locked thread sets its own affinity, and threads Go
// creates later inherit the process's mask, not the worker's (a locked
// thread has Go's template thread create them). GOMAXPROCS is then set
// to the runtime CPUs plus the worker: Go would take it from the mask
// alone, leaving the rest of the runtime no P while the worker spins.
// This is how docs/measuring.md says to run it.
func (b *bench) startXvswitch(t *runT, name string, cpu int, netns string, args ...string) *xvsDaemon {
	dir := t.TempDir()
	sock := filepath.Join(dir, "ctl.sock")
	c := strconv.Itoa(cpu)
	argv := []string{b.xvswitch, "run", "--ctl", sock, "--workers", "1", "--cpus", c}
	argv = append(argv, args...)
	var env []string
	if rt := b.opt.runtimeCPUs; rt != "" {
		argv = append([]string{"taskset", "-c", rt}, argv...)
		cpus, _ := parseCPUList(rt) // checked by parseFlags
		env = []string{"GOMAXPROCS=" + strconv.Itoa(runtimeGOMAXPROCS(cpus))}
	}
	if netns != "" {
		argv = append([]string{"ip", "netns", "exec", netns}, argv...)
	}
	d := &xvsDaemon{proc: startProc(t, filepath.Join(b.logDir, t.name2file()+"-"+name+".log"), env, argv...), ctl: sock}
	deadline := time.Now().Add(15 * time.Second)
	for {
		if _, err := ctl.Call(sock, ctl.Request{Op: ctl.OpShowPorts}); err == nil {
			return d
		}
		if d.done() {
			t.Fatalf("xvswitch %s exited: %v\n%s", name, d.err, tail(d.log, 20))
		}
		if time.Now().After(deadline) {
			t.Fatalf("xvswitch %s did not answer on %s\n%s", name, sock, tail(d.log, 20))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// startSwitch starts the xvswitch under test on switchCPU, with
// -idle-after's --idle-after if given (the wire-side generator keeps the
// default: its generator port never lets its worker sleep anyway).
func (b *bench) startSwitch(t *runT, args ...string) *xvsDaemon {
	if b.opt.idleAfter != "" {
		args = append([]string{"--idle-after", b.opt.idleAfter}, args...)
	}
	return b.startXvswitch(t, "switch", switchCPU, "", args...)
}

// runtimeGOMAXPROCS is the GOMAXPROCS of an xvswitch whose process mask
// is runtimeCPUs and which has one worker: a P for each runtime CPU and
// one the worker holds while it spins (also when its CPU is one of them,
// as the wire-side generator's can be).
func runtimeGOMAXPROCS(runtimeCPUs []int) int { return len(runtimeCPUs) + 1 }

// xvswitchLaunch says how startSwitch runs the switch under test.
func xvswitchLaunch(runtimeCPUs, idleAfter string) string {
	run := fmt.Sprintf("xvswitch run --workers 1 --cpus %d ...", switchCPU)
	if idleAfter != "" {
		run = fmt.Sprintf("xvswitch run --idle-after %s --workers 1 --cpus %d ...", idleAfter, switchCPU)
	}
	if runtimeCPUs == "" {
		return "`" + run + "` (its Go runtime's threads unpinned: they may share the worker's CPU)"
	}
	cpus, _ := parseCPUList(runtimeCPUs)
	return fmt.Sprintf("`taskset -c %s env GOMAXPROCS=%d %s`: the worker thread pins itself to CPU %d, the Go runtime's threads keep the process's mask (CPU %s)",
		runtimeCPUs, runtimeGOMAXPROCS(cpus), run, switchCPU, runtimeCPUs)
}

// workerCPUs asks the daemon where its workers are pinned.
func (d *xvsDaemon) workerCPUs() ([]int, error) {
	resp, err := ctl.Call(d.ctl, ctl.Request{Op: ctl.OpShowWorkers})
	if err != nil {
		return nil, err
	}
	var out []int
	for _, w := range resp.Workers {
		if w.CPU >= 0 {
			out = append(out, w.CPU)
		}
	}
	return out, nil
}

// stats reads the daemon's per-port counters.
func (d *xvsDaemon) stats() ([]ctl.PortCounters, error) {
	resp, err := ctl.Call(d.ctl, ctl.Request{Op: ctl.OpShowStats})
	return resp.Stats, err
}

// guestPort is a virtio-user port as a QEMU guest would configure its
// virtio-net device: mergeable RX buffers on, IN_ORDER off. The ring is
// big (4096) because the guest shares its CPU with the generator or
// prober and is off-CPU for milliseconds at a time.
func guestPort(sock, ring, mac string) testpmd.Port {
	return testpmd.Port{Kind: testpmd.VirtioUser, Path: sock, Packed: ring == "packed",
		MrgRxbuf: true, QueueSize: 4096, MAC: mac}
}

// guestRingPosted is the guest's --rxd where it receives from a NIC
// (scenario 4): all of its 4096-entry ring posted, as a Linux guest keeps
// its ring. Without it testpmd posts its default 512 buffers whatever the
// ring's size, and a zero-copy path, which receives into the guest's
// buffers, then has 512 to receive into while the generator holds the
// switch's CPU, against the copy path's 1024 fill-ring frames of its own
// (measured: 0.073 Mpps zero-copy vs 0.139 copied with 512 posted; 0.146
// vs 0.130 with the ring posted). Elsewhere the guest keeps testpmd's
// default, as in every run before.
const guestRingPosted = 4096

// startGuest starts the guest testpmd on guestCPU, interactive, ports up,
// not forwarding yet. rxd is its --rxd, the RX buffers it posts per queue
// (0: testpmd's default, 512).
func (b *bench) startGuest(t *runT, ports []testpmd.Port, mode string, size, rxd int, peers map[int]string) *testpmd.Process {
	return testpmd.Start(t, testpmd.Config{
		Name: "guest", Ports: ports, Mode: mode, FrameSize: size, EthPeers: peers,
		MainCPU: guestCPU, FwdCPUs: []int{guestCPU}, RxD: rxd, HugeDir: b.opt.hugeDir,
		Interactive: true, StatsPeriod: time.Hour, // statistics only when asked
	})
}

// startDPDKSwitch starts DPDK's switching testpmd on switchCPU.
func (b *bench) startDPDKSwitch(t *runT, ports []testpmd.Port, mode string, size int) *testpmd.Process {
	return testpmd.Start(t, testpmd.Config{
		Name: "dpdk-switch", Ports: ports, Mode: mode, FrameSize: size,
		MainCPU: switchCPU, FwdCPUs: []int{switchCPU},
		RxD: 1024, TxD: 1024, HugeDir: b.opt.hugeDir,
		Interactive: true, StatsPeriod: time.Hour,
	})
}

// portStats asks an interactive testpmd for its port counters now and
// returns the blocks printed after the request.
func portStats(tp *testpmd.Process, ports ...int) (map[int]testpmd.PortStats, error) {
	req := time.Now()
	if err := tp.Cmd("show port stats all"); err != nil {
		return nil, err
	}
	var got map[int]testpmd.PortStats
	err := tp.WaitStats(func(m map[int]testpmd.PortStats) bool {
		for _, p := range ports {
			if !m[p].At.After(req) {
				return false
			}
		}
		got = m
		return true
	}, 10*time.Second)
	return got, err
}

// rxCounter counts the frames testpmd's ports received, summed.
func rxCounter(tp *testpmd.Process, ports ...int) func() (uint64, time.Time, error) {
	return testpmdCounter(tp, ports, func(s testpmd.PortStats) uint64 { return s.RxPackets })
}

// txCounter counts the frames testpmd's ports transmitted, summed.
func txCounter(tp *testpmd.Process, ports ...int) func() (uint64, time.Time, error) {
	return testpmdCounter(tp, ports, func(s testpmd.PortStats) uint64 { return s.TxPackets })
}

func testpmdCounter(tp *testpmd.Process, ports []int, field func(testpmd.PortStats) uint64) func() (uint64, time.Time, error) {
	return func() (uint64, time.Time, error) {
		m, err := portStats(tp, ports...)
		if err != nil {
			return 0, time.Time{}, err
		}
		var n uint64
		var at time.Time
		for _, p := range ports {
			n += field(m[p])
			if at.IsZero() || m[p].At.Before(at) {
				at = m[p].At
			}
		}
		return n, at, nil
	}
}

// nsRxCounter counts the frames a namespace's interface received.
func nsRxCounter(v *netns.Veth) func() (uint64, time.Time, error) {
	return func() (uint64, time.Time, error) {
		out, err := v.NS.Exec("cat", "/sys/class/net/"+v.Inner+"/statistics/rx_packets").Output()
		at := time.Now()
		if err != nil {
			return 0, at, err
		}
		n, err := strconv.ParseUint(strings.TrimSpace(string(out)), 10, 64)
		return n, at, err
	}
}

// wire makes the "NIC": a veth pair whose outer end the switch attaches
// to and whose inner end lives in a namespace, with queues queues (0: one).
// The MTU fits a 1518-byte frame (1504 bytes of payload); IPv6 is off in
// the namespace so the kernel sends nothing of its own while frames are
// counted. With more than one queue the namespace's frames are steered
// as the zero-copy path needs (steerWire).
func wire(t *runT, queues int) (*netns.Veth, string) {
	v := netns.NewVeth(t, netns.VethOptions{MTU: 1600, Queues: queues})
	v.NS.MustRun(t, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1")
	netns.MustRun(t, "sysctl", "-qw", "net.ipv6.conf."+v.Outer+".disable_ipv6=1")
	if queues > 1 {
		steerWire(t, v)
	}
	return v, netns.MAC(t, v.NS, v.Inner)
}

// startGenerator runs the wire-side traffic source: an xvswitch in the
// namespace whose benchmark generator port is cross-connected to the
// inner end of the veth (AF_XDP copy-mode TX), its worker on cpu. The
// same generator feeds both systems.
func (b *bench) startGenerator(t *runT, v *netns.Veth, size int, dst string, cpu int) *xvsDaemon {
	return b.startXvswitch(t, "generator", cpu, v.NS.Name,
		"--nic", v.Inner+",mode=copy,name=wire",
		"--gen", fmt.Sprintf("gen0,size=%d,dst=%s", size, dst),
		"--xconnect", "gen0=wire")
}
