// Package testpmd runs DPDK's dpdk-testpmd as a peer for integration
// tests and benchmarks: a virtio-user front-end that plays a guest driver
// against a vhost-user back-end under test, a vhost-user back-end that
// plays the switch for a front-end, or a traffic generator on a kernel
// interface (AF_XDP) or a pcap file. It builds the command line, starts
// and stops the process, and parses its statistics. No production package
// imports it.
package testpmd

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// A dpdk-testpmd peer for tests, e.g. a guest-side traffic source for a
// vhost-user back-end under test (sock is the back-end's socket):
//
//	tp := testpmd.Start(t, testpmd.Config{
//		Name:  "guest",
//		Ports: []testpmd.Port{{Kind: testpmd.VirtioUser, Path: sock, Packed: true, MrgRxbuf: true}},
//		Mode:  "txonly", FrameSize: 64, FwdCPUs: []int{0},
//		Interactive: true, StatsPeriod: 200 * time.Millisecond,
//	})
//	tp.Cmd("start")
//	... wait for the back-end's counters ...
//	fwd, _ := tp.StopForwarding(10 * time.Second) // fwd.Ports[0].TxPackets left the ring
//
// Non-interactive instances start forwarding at once and print statistics
// every second; interactive ones wait for "start" (or "start tx_first N"
// for closed loops), are polled with "show port stats all", and stop
// without the ~1 s lag of SIGINT (which testpmd only notices in its
// once-a-second statistics loop). Prefer interactive senders when counting
// exactly: see sendAndCount in testpmd_test.go.
//
// This file describes a dpdk-testpmd peer and turns the description into a
// command line. Starting, reading and stopping the process is in proc.go;
// parsing its statistics is in stats.go.
//
// The recipe (measured on this kind of machine, see
// docs/testing-peers.md "DPDK testpmd"): no hugepages
// (--no-huge -m N --no-pci), a unique --file-prefix per process, a small
// explicit mbuf pool, drivers loaded with -d from Debian's PMD folder, an
// explicit --lcores map (2 CPUs shared by everything), and --stats-period
// so a non-interactive testpmd with no terminal keeps running.

// PortKind says which DPDK driver a port uses.
type PortKind int

const (
	// VirtioUser is DPDK's virtio-user front-end (net_virtio_user): it
	// plays a guest driver on a vhost-user socket, for testing a back-end.
	VirtioUser PortKind = iota + 1
	// VhostUser is DPDK's vhost-user back-end (net_vhost): it plays the
	// switch, for testing a front-end (QEMU, or the reference).
	VhostUser
	// AFXDP is DPDK's AF_XDP driver (net_af_xdp) on a kernel interface,
	// for the bench (a traffic generator on the NIC side).
	AFXDP
	// Pcap is DPDK's pcap driver (net_pcap): frames sent on the port are
	// written to TxPcap, frames received are read from RxPcap. Handy to
	// record exactly what testpmd sends.
	Pcap
)

// Port is one port of a testpmd. Ports get DPDK port IDs in the
// order they are listed. Every virtio flag is passed explicitly on the
// command line: the zero value of a bool means 0, not DPDK's default
// (DPDK defaults mrg_rxbuf and in_order to 1), so a test says what it
// negotiates.
type Port struct {
	Kind PortKind

	// Path is the vhost-user socket (virtio-user "path", vhost "iface").
	Path string
	// Queues is the number of queue pairs (default 1).
	Queues int

	// Server (virtio-user only) makes testpmd listen on Path (server=1).
	// DPDK 22.11 then blocks in device probe until a back-end connects:
	// start it with Config.NoWait and call WaitReady after the
	// back-end has connected.
	Server bool
	// Packed, MrgRxbuf, InOrder (virtio-user only): packed_vq, mrg_rxbuf
	// and in_order, each always passed as 0 or 1.
	Packed, MrgRxbuf, InOrder bool
	// QueueSize (virtio-user only) is the ring size (DPDK default 256).
	// A receiver that shares a CPU needs a big one (4096) or it drops.
	QueueSize int
	// MAC (virtio-user only) is the port's MAC ("02:..."); DPDK picks a
	// random one otherwise. Process.MAC reports the one in use.
	MAC string

	// Client (vhost only) makes the back-end connect to Path (client=1)
	// instead of listening; DPDK retries until the socket appears.
	Client bool

	// Iface, StartQueue, QueueCount (AF_XDP only): the kernel interface
	// and the range of its queues the port binds to (QueueCount defaults
	// to Queues). Use Config.MbufSize 3712 for an MTU of 3000.
	Iface                  string
	StartQueue, QueueCount int

	// RxPcap, TxPcap (pcap only): files read from and written to. With no
	// RxPcap the port receives nothing.
	RxPcap, TxPcap string

	// Devargs are appended to the port's devargs verbatim ("k=v,k=v").
	Devargs string
}

// Config describes one testpmd process.
type Config struct {
	// Name labels the log file and the DPDK file prefix ("tp" default).
	Name  string
	Ports []Port

	// Mode is the forwarding mode: "io" (default), "txonly", "rxonly",
	// "macswap", "mac" (rewrites MACs: source = port, destination = the
	// --eth-peer), or any other testpmd mode.
	Mode string
	// FrameSize is the length of the frames txonly (and tx_first) sends,
	// Ethernet header to end of payload, no FCS (--txpkts; default 64,
	// at least 42: see TxonlyFrame).
	FrameSize int
	// Burst is the packets per burst (--burst; default 32).
	Burst int
	// RxD, TxD are the descriptors per queue of testpmd's own rings
	// (--rxd/--txd). For a vhost port that is the size of testpmd's
	// burst buffers, not the guest's ring. For a virtio-user port RxD is
	// how many receive buffers the driver posts (at most the ring's
	// QueueSize): testpmd's default is 512 whatever the ring's size.
	RxD, TxD int
	// Topology is --port-topology: "paired" (default: 0<->1), "chained"
	// or "loop" (each port forwards to itself).
	Topology string
	// EthPeers sets the destination MAC that txonly and mac modes write,
	// per port ID (--eth-peer). Default 02:00:00:00:00:<port ID>.
	EthPeers map[int]string

	// MainCPU is the CPU of the main lcore (which prints statistics and
	// runs the control threads); FwdCPUs are the CPUs of the forwarding
	// lcores, one each (--nb-cores). Default: main on CPU 0, one
	// forwarding lcore on CPU 1. With two testpmds on 2 CPUs give them
	// different forwarding CPUs; main lcores can share CPU 0. Put a
	// sender's forwarding lcore on the main lcores' CPU and the receiver's
	// alone: the sender's teardown then doesn't starve the receiver.
	MainCPU int
	FwdCPUs []int

	// MemoryMB is the EAL memory (-m; default 256, more if the mbuf pool
	// needs it). virtio-user shares it whole with the back-end as guest
	// memory; 1024 makes startup ~1 s slower.
	MemoryMB int
	// HugeDir, if set, is a hugetlbfs mount: EAL memory comes from 2 MiB
	// pages there (one file per memory list, --single-file-segments, so
	// that virtio-user shares it as a few regions) instead of --no-huge's
	// 4 KiB pages. As a QEMU guest's memory is when it is backed by
	// hugepages, the usual setup for vhost-user.
	HugeDir string
	// Mbufs is --total-num-mbufs. DPDK's default fails without hugepages;
	// ours is 16384, or twice what the rings can hold when that is more
	// (every RX ring slot holds an mbuf: big queue_size or --rxd with
	// several queues and ports exhausts a small pool). MbufSize is
	// --mbuf-size (DPDK's default 2176 carries frames up to ~2 KiB).
	Mbufs, MbufSize int

	// Interactive runs testpmd with -i and a pipe for Cmd: forwarding
	// waits for a "start" (or "start tx_first N" for closed loops).
	// Statistics are then fetched with "show port stats all" every
	// StatsPeriod. Each "start" first reads and frees whatever waits in
	// the RX queues (counted in port statistics, not in forward
	// statistics): start receivers before senders, or pass --no-flush-rx
	// in ExtraArgs.
	Interactive bool
	// StatsPeriod is how often port statistics are printed (default 1 s;
	// testpmd's granularity is whole seconds).
	StatsPeriod time.Duration

	// NoWait returns from Start as soon as the process runs and
	// every listening socket it owns exists, instead of waiting until
	// its ports are up. Call WaitReady later.
	NoWait bool
	// ReadyTimeout bounds the wait for readiness (default 30 s).
	ReadyTimeout time.Duration

	// ExtraEAL and ExtraArgs are appended to the EAL and application
	// arguments.
	ExtraEAL, ExtraArgs []string
}

func (c *Config) setDefaults() {
	if c.Name == "" {
		c.Name = "tp"
	}
	if c.Mode == "" {
		c.Mode = "io"
	}
	if len(c.FwdCPUs) == 0 {
		c.FwdCPUs = []int{1}
	}
	for i := range c.Ports {
		p := &c.Ports[i]
		p.Queues = max(p.Queues, p.QueueCount, 1)
	}
	if c.Mbufs == 0 {
		need := 0
		for _, p := range c.Ports {
			need += p.Queues * (max(p.QueueSize, 256, c.RxD) + max(p.QueueSize, 256, c.TxD))
		}
		c.Mbufs = max(16384, 2*need)
	}
	if c.MemoryMB == 0 {
		// Each mbuf takes its data room plus ~256 bytes of header and
		// headroom; leave as much again for rings, the vhost tables and
		// EAL itself.
		size := c.MbufSize
		if size == 0 {
			size = 2176
		}
		c.MemoryMB = max(256, 2*c.Mbufs*(size+256)>>20)
	}
	if c.StatsPeriod <= 0 {
		c.StatsPeriod = time.Second
	}
	if c.ReadyTimeout <= 0 {
		c.ReadyTimeout = 30 * time.Second
	}
}

// devargs returns the --vdev value of port i.
func (p Port) devargs(i int) (string, error) {
	b01 := func(v bool) string {
		if v {
			return "1"
		}
		return "0"
	}
	var kv []string
	var name string
	switch p.Kind {
	case VirtioUser:
		if err := checkSocketPath(p.Path); err != nil {
			return "", fmt.Errorf("port %d: %w", i, err)
		}
		name = "net_virtio_user"
		kv = append(kv, "path="+p.Path, "queues="+strconv.Itoa(p.Queues),
			"server="+b01(p.Server), "packed_vq="+b01(p.Packed),
			"mrg_rxbuf="+b01(p.MrgRxbuf), "in_order="+b01(p.InOrder))
		if p.QueueSize > 0 {
			kv = append(kv, "queue_size="+strconv.Itoa(p.QueueSize))
		}
		if p.MAC != "" {
			kv = append(kv, "mac="+p.MAC)
		}
	case VhostUser:
		if err := checkSocketPath(p.Path); err != nil {
			return "", fmt.Errorf("port %d: %w", i, err)
		}
		name = "net_vhost"
		kv = append(kv, "iface="+p.Path, "queues="+strconv.Itoa(p.Queues), "client="+b01(p.Client))
	case AFXDP:
		if p.Iface == "" {
			return "", fmt.Errorf("port %d: af_xdp needs Iface", i)
		}
		name = "net_af_xdp"
		qc := p.QueueCount
		if qc <= 0 {
			qc = p.Queues
		}
		kv = append(kv, "iface="+p.Iface, "start_queue="+strconv.Itoa(p.StartQueue),
			"queue_count="+strconv.Itoa(qc))
	case Pcap:
		name = "net_pcap"
		if p.RxPcap != "" {
			kv = append(kv, "rx_pcap="+p.RxPcap)
		}
		if p.TxPcap != "" {
			kv = append(kv, "tx_pcap="+p.TxPcap)
		}
	default:
		return "", fmt.Errorf("port %d: unknown kind %d", i, p.Kind)
	}
	if p.Devargs != "" {
		kv = append(kv, p.Devargs)
	}
	return name + strconv.Itoa(i) + "," + strings.Join(kv, ","), nil
}

// checkSocketPath rejects what bind/connect would: an empty path or one
// longer than sun_path (107 bytes and a NUL). t.TempDir paths of long
// subtest names get close.
func checkSocketPath(p string) error {
	switch {
	case p == "":
		return fmt.Errorf("no socket path")
	case len(p) > 107:
		return fmt.Errorf("socket path of %d bytes, more than a unix socket takes (107): %s", len(p), p)
	}
	if strings.ContainsRune(p, ',') {
		return fmt.Errorf("socket path with a comma (it would split the devargs): %s", p)
	}
	return nil
}

// args returns testpmd's argument list (after the program name).
func (c *Config) args(pmdDir, prefix string) ([]string, error) {
	lcores := []string{"0@" + strconv.Itoa(c.MainCPU)}
	for i, cpu := range c.FwdCPUs {
		lcores = append(lcores, fmt.Sprintf("%d@%d", i+1, cpu))
	}
	mem := []string{"--no-huge"}
	if c.HugeDir != "" {
		mem = []string{"--huge-dir", c.HugeDir, "--single-file-segments"}
	}
	a := []string{"-d", pmdDir}
	a = append(a, mem...)
	a = append(a,
		"-m", strconv.Itoa(c.MemoryMB), "--no-pci",
		"--file-prefix="+prefix,
		"--lcores="+strings.Join(lcores, ","),
	)
	queues := 1
	for i, p := range c.Ports {
		d, err := p.devargs(i)
		if err != nil {
			return nil, err
		}
		a = append(a, "--vdev", d)
		queues = max(queues, p.Queues)
	}
	a = append(a, c.ExtraEAL...)
	a = append(a, "--")
	if c.Interactive {
		a = append(a, "-i")
	} else {
		// Without a period a non-interactive testpmd whose stdin is not
		// a terminal exits at once.
		a = append(a, "--stats-period="+strconv.Itoa(max(1, int(c.StatsPeriod/time.Second))))
	}
	a = append(a,
		"--forward-mode="+c.Mode,
		"--nb-cores="+strconv.Itoa(len(c.FwdCPUs)),
		"--total-num-mbufs="+strconv.Itoa(c.Mbufs),
		"--rxq="+strconv.Itoa(queues), "--txq="+strconv.Itoa(queues),
	)
	if c.MbufSize > 0 {
		a = append(a, "--mbuf-size="+strconv.Itoa(c.MbufSize))
	}
	if c.FrameSize > 0 {
		a = append(a, "--txpkts="+strconv.Itoa(c.FrameSize))
	}
	if c.Burst > 0 {
		a = append(a, "--burst="+strconv.Itoa(c.Burst))
	}
	if c.RxD > 0 {
		a = append(a, "--rxd="+strconv.Itoa(c.RxD))
	}
	if c.TxD > 0 {
		a = append(a, "--txd="+strconv.Itoa(c.TxD))
	}
	if c.Topology != "" {
		a = append(a, "--port-topology="+c.Topology)
	}
	for port, mac := range c.EthPeers {
		a = append(a, fmt.Sprintf("--eth-peer=%d,%s", port, mac))
	}
	a = append(a, c.ExtraArgs...)
	return a, nil
}

var pmdDirOnce struct {
	sync.Once
	dir string
	err error
}

// PMDDir returns the folder Debian's DPDK drivers are installed in
// (testpmd finds no driver unless -d names it), looked up once with
// `dpkg -L librte-net-vhost23`.
func PMDDir() (string, error) {
	pmdDirOnce.Do(func() {
		out, err := exec.Command("dpkg", "-L", "librte-net-vhost23").Output()
		if err == nil {
			for _, l := range strings.Split(string(out), "\n") {
				// The folder itself is listed too: take a driver's folder.
				if strings.Contains(l, "/pmds-") && strings.Contains(filepath.Base(l), ".so") {
					pmdDirOnce.dir = filepath.Dir(l)
					return
				}
			}
		}
		// Not a dpkg system, or the package is named differently: look
		// where Debian and Ubuntu put it.
		m, _ := filepath.Glob("/usr/lib/*/dpdk/pmds-*/librte_net_vhost.so*")
		if len(m) > 0 {
			pmdDirOnce.dir = filepath.Dir(m[0])
			return
		}
		pmdDirOnce.err = fmt.Errorf("DPDK PMD folder not found (dpkg -L librte-net-vhost23: %v)", err)
	})
	return pmdDirOnce.dir, pmdDirOnce.err
}
