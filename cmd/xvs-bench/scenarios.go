package main

import (
	"fmt"
	"path/filepath"
	"time"

	"github.com/xvswitch/xvswitch/test/netns"
	"github.com/xvswitch/xvswitch/test/testpmd"
)

// Case is one row of the results: a scenario with a frame size, a ring
// kind and (VM -> VM) a forwarding mode, measured on both systems.
type Case struct {
	ID       string `json:"id"`
	Scenario int    `json:"scenario"`
	Title    string `json:"title"`
	Mode     string `json:"mode,omitempty"` // VM -> VM: xconnect or bridge
	Size     int    `json:"frame_size"`
	Ring     string `json:"ring"`
	Kind     string `json:"kind"` // rate, latency or idle
	// Instrument says where the rate or latency is measured, the same
	// place for both systems.
	Instrument string `json:"instrument"`
	// ByDesignDrop is a drop reason that is the case's own instrument,
	// left out of the window drops: scenario 1's one-port xvswitch drops
	// every frame as no_destination, as DPDK's rxonly frees them.
	ByDesignDrop string `json:"by_design_drop,omitempty"`
	// Systems are the systems the case alternates, in round order; empty
	// (reports from before it existed) means xvswitch and DPDK.
	Systems []string `json:"systems,omitempty"`
	// WireQueues is the number of queues of the veth "NIC" (NIC cases;
	// 0 or 1: one). Two when the case has the zero-copy system: its VM
	// owns one queue, the NIC port keeps the other (zerocopy.go).
	WireQueues int `json:"wire_queues,omitempty"`
}

// systems is c's systems, in the order its rounds run them.
func (c Case) systems() []string {
	if len(c.Systems) == 0 {
		return []string{sysXvswitch, sysDPDK}
	}
	return c.Systems
}

// has says whether c runs system sys.
func (c Case) has(sys string) bool {
	for _, s := range c.systems() {
		if s == sys {
			return true
		}
	}
	return false
}

const (
	kindRate    = "rate"
	kindLatency = "latency"
	kindIdle    = "idle"
)

var titles = map[int]string{
	1: "VM -> switch",
	2: "switch -> VM",
	3: "VM -> VM",
	4: "NIC -> VM",
	5: "VM -> NIC",
	6: "NIC <-> VM latency",
	7: "idle",
}

var instruments = map[int]string{
	1: "guest testpmd TX-packets (frames the switch took from the ring)",
	2: "guest testpmd RX-packets",
	3: "guest testpmd RX-packets, both ports (closed loop primed with start tx_first 16)",
	4: "guest testpmd RX-packets; offered = the generator's AF_XDP TX (xvswitch --gen cross-connected to the veth's inner end; its worker shares CPU 1 with the switch, see BENCHMARKS.md)",
	5: "rx_packets of the veth end in the namespace (frames to a MAC nobody there has, which its stack drops on arrival); offered = guest testpmd TX-packets",
	6: "round trips of one probe at a time: AF_PACKET in the namespace -> switch -> guest testpmd macswap -> switch -> namespace",
	7: "CPU time of the switching process; guest connected, no traffic",
}

// Paths of xvswitch between the NIC and a VM (-paths): its copy path, and
// the zero-copy path of a VM that owns a NIC queue (docs/zerocopy.md).
// Scenarios 4 and 5 run one xvswitch system per path; the others have
// no zero-copy path and run the copy path only.
const (
	pathCopy     = "copy"
	pathZerocopy = "zerocopy"
)

// zerocopyScenario says whether scenario s runs the zero-copy path.
func zerocopyScenario(s int) bool { return s == 4 || s == 5 }

// newCase is a case with xvswitch's copy path beside DPDK.
func newCase(scenario int, mode string, size int, ring string) Case {
	return newPathCase(scenario, mode, size, ring, []string{pathCopy})
}

// newPathCase is a case whose xvswitch systems take the given paths
// (only scenarios 4 and 5 have the zero-copy path), then DPDK. With the
// zero-copy path the NIC gets two queues, for every system of the case.
func newPathCase(scenario int, mode string, size int, ring string, paths []string) Case {
	kind := kindRate
	switch scenario {
	case 6:
		kind = kindLatency
	case 7:
		kind = kindIdle
	}
	id := fmt.Sprintf("s%d", scenario)
	if mode != "" {
		id += "-" + mode
	}
	id += fmt.Sprintf("-%d-%s", size, ring)
	c := Case{ID: id, Scenario: scenario, Title: titles[scenario], Mode: mode, Size: size, Ring: ring,
		Kind: kind, Instrument: instruments[scenario]}
	if scenario == 1 {
		c.ByDesignDrop = "no_destination"
	}
	for _, p := range paths {
		switch {
		case p == pathCopy:
			c.Systems = append(c.Systems, sysXvswitch)
		case p == pathZerocopy && zerocopyScenario(scenario):
			c.Systems = append(c.Systems, sysXvswitchZerocopy)
			c.WireQueues = 2
		}
	}
	if len(c.Systems) == 0 { // zero-copy only, in a scenario without it
		c.Systems = append(c.Systems, sysXvswitch)
	}
	c.Systems = append(c.Systems, sysDPDK)
	if len(c.Systems) == 2 && c.Systems[0] == sysXvswitch {
		c.Systems = nil // the default: keeps the JSON of such cases as it was
	}
	return c
}

// plan lists the cases of a run: every scenario for every frame size and
// ring kind (VM -> VM in each of modes; latency with the first frame
// size only, idle once per ring); NIC -> VM and VM -> NIC run xvswitch on
// each of paths.
func plan(scenarios []int, sizes []int, rings, modes, paths []string) []Case {
	var out []Case
	for _, s := range scenarios {
		for _, ring := range rings {
			switch s {
			case 3:
				for _, mode := range modes {
					for _, size := range sizes {
						out = append(out, newCase(s, mode, size, ring))
					}
				}
			case 6, 7:
				out = append(out, newCase(s, "", sizes[0], ring))
			case 4, 5:
				for _, size := range sizes {
					out = append(out, newPathCase(s, "", size, ring, paths))
				}
			default:
				for _, size := range sizes {
					out = append(out, newCase(s, "", size, ring))
				}
			}
		}
	}
	return out
}

// topo is one system's instance of a case, set up and ready to go.
type topo struct {
	pid      int                               // the switching process
	guestPid int                               // the guest testpmd
	start    func()                            // starts the traffic (may call t.Fatalf)
	count    func() (uint64, time.Time, error) // rate cases: cumulative frames
	// probe measures latency cases: probes round trips, within limit.
	probe func(probes int, limit time.Duration) (*Latency, error)
	// offered, if set, counts what the source sent (cumulative frames),
	// read just after count: the offered load next to the delivered rate.
	offered func() (uint64, time.Time, error)
	// drops reads the switch's cumulative drop counters (drops.go).
	drops func() (Drops, error)
	// workerCPUs (xvswitch) are the CPUs its workers are pinned to.
	workerCPUs []int
	// paths (xvswitch) reads its ports' path and kernel counters.
	paths func() (Paths, error)
}

const (
	sysXvswitch = "xvswitch"
	// sysXvswitchZerocopy is xvswitch with the guest's port owning a NIC
	// queue (own=): the zero-copy path, where the frames allow it.
	sysXvswitchZerocopy = "xvswitch-zerocopy"
	sysDPDK             = "dpdk"
)

// build sets up case c on system sys. It runs inside t.step: failures
// abort through t.Fatalf, and t's cleanups tear everything down.
func (b *bench) build(t *runT, c Case, sys string) *topo {
	dir := t.TempDir()
	sock0, sock1 := filepath.Join(dir, "vu0.sock"), filepath.Join(dir, "vu1.sock")
	vhost := func(path string) testpmd.Port { return testpmd.Port{Kind: testpmd.VhostUser, Path: path} }
	xvs := sys != sysDPDK
	tp := &topo{}
	var d *xvsDaemon
	var sw *testpmd.Process
	swPorts := 1 // the DPDK switch's ports, for its drop counters
	setPID := func() {
		if xvs {
			if sys == sysXvswitchZerocopy {
				// The guest is up: its memory table is in.
				waitOwnSockets(t, d)
			}
			tp.pid = d.pid()
			tp.drops = d.drops
			tp.paths = d.paths
			cpus, err := d.workerCPUs()
			if err != nil || len(cpus) == 0 {
				t.Fatalf("xvswitch show workers: %v (CPUs %v)", err, cpus)
			}
			tp.workerCPUs = cpus
		} else {
			tp.pid = sw.Pid()
			ports := make([]int, swPorts)
			for i := range ports {
				ports[i] = i
			}
			tp.drops = func() (Drops, error) { return testpmdDrops(sw, ports...) }
		}
	}
	startAll := func(tps ...*testpmd.Process) func() {
		return func() {
			for _, p := range tps {
				if p == nil {
					continue
				}
				if err := p.Cmd("start"); err != nil {
					t.Fatalf("start: %v", err)
				}
			}
		}
	}
	// startNICVM starts the switch of scenarios 4-7: the wire's outer
	// end (AF_XDP) and one vhost port for the guest.
	startNICVM := func(v *netns.Veth) {
		swPorts = 2
		if xvs {
			d = b.startSwitch(t, "--nic", v.Outer+",mode=copy,name=nic0", "--vhost", guestVhostSpec(sys, sock0, v))
		} else {
			sw = b.startDPDKSwitch(t, []testpmd.Port{{Kind: testpmd.AFXDP, Iface: v.Outer}, vhost(sock0)}, "io", c.Size)
		}
	}
	switch c.Scenario {
	case 1: // VM -> switch: virtio-user txonly into a port that only receives.
		if xvs {
			// A one-port switch: frames are received, released to the
			// guest and counted as dropped (no_destination), DPDK's rxonly.
			d = b.startSwitch(t, "--vhost", sock0+",name=vu0")
		} else {
			sw = b.startDPDKSwitch(t, []testpmd.Port{vhost(sock0)}, "rxonly", c.Size)
		}
		g := b.startGuest(t, []testpmd.Port{guestPort(sock0, c.Ring, guestMAC0)}, "txonly", c.Size, 0, nil)
		tp.guestPid = g.Pid()
		tp.start = startAll(sw, g)
		tp.count = txCounter(g, 0)

	case 2: // switch -> VM: the switch sends, virtio-user rxonly.
		if xvs {
			d = b.startSwitch(t, "--vhost", sock0+",name=vu0,mac="+guestMAC0,
				"--gen", fmt.Sprintf("gen0,size=%d,dst=%s", c.Size, guestMAC0), "--xconnect", "gen0=vu0")
		} else {
			sw = b.startDPDKSwitch(t, []testpmd.Port{vhost(sock0)}, "txonly", c.Size)
		}
		g := b.startGuest(t, []testpmd.Port{guestPort(sock0, c.Ring, guestMAC0)}, "rxonly", c.Size, 0, nil)
		tp.guestPid = g.Pid()
		tp.start = startAll(g, sw)
		tp.count = rxCounter(g, 0)

	case 3: // VM -> VM: a closed loop through two ports.
		if xvs {
			args := []string{"--vhost", sock0 + ",name=vu0", "--vhost", sock1 + ",name=vu1"}
			if c.Mode == "xconnect" {
				args = append(args, "--xconnect", "vu0=vu1")
			}
			d = b.startSwitch(t, args...)
		} else {
			sw = b.startDPDKSwitch(t, []testpmd.Port{vhost(sock0), vhost(sock1)}, "io", c.Size)
		}
		swPorts = 2
		// Each guest port sends to the other's MAC; io forwarding sends
		// what one port receives out of the other, unchanged, so every
		// frame keeps circling in its direction.
		g := b.startGuest(t, []testpmd.Port{guestPort(sock0, c.Ring, guestMAC0), guestPort(sock1, c.Ring, guestMAC1)},
			"io", c.Size, 0, map[int]string{0: guestMAC1, 1: guestMAC0})
		tp.guestPid = g.Pid()
		tp.start = func() {
			startAll(sw)()
			if err := g.Cmd("start tx_first 16"); err != nil {
				t.Fatalf("%v", err)
			}
		}
		tp.count = rxCounter(g, 0, 1)

	case 4: // NIC -> VM
		v, _ := wire(t, c.WireQueues)
		startNICVM(v)
		g := b.startGuest(t, []testpmd.Port{guestPort(sock0, c.Ring, guestMAC0)}, "rxonly", c.Size, guestRingPosted, nil)
		tp.guestPid = g.Pid()
		var gen *xvsDaemon
		tp.start = func() {
			startAll(sw, g)()
			gen = b.startGenerator(t, v, c.Size, guestMAC0, b.opt.genCPU)
		}
		tp.count = rxCounter(g, 0)
		tp.offered = func() (uint64, time.Time, error) {
			st, err := gen.stats()
			for _, p := range st {
				if p.Name == "wire" {
					return p.TxPackets, time.Now(), err
				}
			}
			return 0, time.Now(), fmt.Errorf("generator: no wire port in %+v (%v)", st, err)
		}

	case 5: // VM -> NIC
		v, _ := wire(t, c.WireQueues)
		startNICVM(v)
		g := b.startGuest(t, []testpmd.Port{guestPort(sock0, c.Ring, guestMAC0)}, "txonly", c.Size, 0, map[int]string{0: wireSinkMAC})
		tp.guestPid = g.Pid()
		tp.start = startAll(sw, g)
		tp.count = nsRxCounter(v)
		tp.offered = txCounter(g, 0)

	case 6: // NIC <-> VM latency
		v, innerMAC := wire(t, c.WireQueues)
		startNICVM(v)
		g := b.startGuest(t, []testpmd.Port{guestPort(sock0, c.Ring, guestMAC0)}, "macswap", c.Size, 0, nil)
		tp.guestPid = g.Pid()
		tp.start = startAll(sw, g)
		tp.probe = func(probes int, limit time.Duration) (*Latency, error) {
			return probeRTT(v.NS, v.Inner, innerMAC, guestMAC0, guestCPU, b.opt.proberRT, c.Size, probes, limit)
		}

	case 7: // idle: a NIC and a connected guest, no traffic.
		v, _ := wire(t, c.WireQueues)
		startNICVM(v)
		// The guest's ports are up (its rings are set up, the switch sees
		// it connected) but it does not poll: it sends nothing. (Started
		// and stopped once, so it has forward statistics to print when it
		// is shut down.)
		g := b.startGuest(t, []testpmd.Port{guestPort(sock0, c.Ring, guestMAC0)}, "rxonly", c.Size, 0, nil)
		tp.guestPid = g.Pid()
		if err := g.Cmd("start"); err != nil {
			t.Fatalf("%v", err)
		}
		if _, err := g.StopForwarding(10 * time.Second); err != nil {
			t.Fatalf("%v", err)
		}
		tp.start = startAll(sw)

	default:
		t.Fatalf("no scenario %d", c.Scenario)
	}
	setPID()
	return tp
}
