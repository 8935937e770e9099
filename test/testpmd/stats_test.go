package testpmd

import (
	"bytes"
	"strings"
	"testing"
)

// Output captured from dpdk-testpmd 22.11 (a vhost port in rxonly, run
// interactively; a VHOST_CONFIG line from another thread lands inside a
// block, as it does in real logs).
const sampleTestpmdOutput = "Port 0: 56:48:4F:53:54:00\n" +
	"Checking link statuses...\n" +
	"testpmd> show port stats all\r\n" +
	"\n" +
	"  ######################## NIC statistics for port 0  ########################\n" +
	"  RX-packets: 18786519   RX-missed: 3          RX-bytes:  1202337216\n" +
	"VHOST_CONFIG: (/tmp/tp/vh.sock) read message VHOST_USER_GET_STATUS\n" +
	"  RX-errors: 1\n" +
	"  RX-nombuf:  2         \n" +
	"  TX-packets: 5          TX-errors: 0          TX-bytes:  320\n" +
	"\n" +
	"  Throughput (since last show)\n" +
	"  Rx-pps:      7000001          Rx-bps:   3584000512\n" +
	"  Tx-pps:            0          Tx-bps:            0\n" +
	"  ############################################################################\n" +
	"testpmd> stop\r\n" +
	"Telling cores to stop...\n" +
	"Waiting for lcores to finish...\n" +
	"\n" +
	"  ---------------------- Forward statistics for port 0  ----------------------\n" +
	"  RX-packets: 18786519       RX-dropped: 3             RX-total: 18786522\n" +
	"  TX-packets: 5              TX-dropped: 7             TX-total: 12\n" +
	"  ----------------------------------------------------------------------------\n" +
	"\n" +
	"  ---------------------- Forward statistics for port 1  ----------------------\n" +
	"  RX-packets: 4              RX-dropped: 0             RX-total: 4\n" +
	"  TX-packets: 9              TX-dropped: 0             TX-total: 9\n" +
	"  ----------------------------------------------------------------------------\n" +
	"\n" +
	"  +++++++++++++++ Accumulated forward statistics for all ports+++++++++++++++\n" +
	"  RX-packets: 18786523       RX-dropped: 3             RX-total: 18786526\n" +
	"  TX-packets: 14             TX-dropped: 7             TX-total: 21\n" +
	"  ++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++\n" +
	"\n" +
	"Done.\n" +
	"testpmd> Port 0: link state change event\n"

func TestTestpmdStatsParser(t *testing.T) {
	var ports = map[int]PortStats{}
	var fwd []FwdStats
	var macs = map[int]string{}
	p := &statsParser{
		onPort: func(port int, s PortStats) { ports[port] = s },
		onFwd:  func(f FwdStats) { fwd = append(fwd, f) },
		onMAC:  func(port int, mac string) { macs[port] = mac },
	}
	for _, l := range strings.SplitAfter(sampleTestpmdOutput, "\n") {
		p.line(l)
	}
	want := PortStats{RxPackets: 18786519, RxMissed: 3, RxBytes: 1202337216, RxErrors: 1, RxNombuf: 2,
		TxPackets: 5, TxBytes: 320, RxPPS: 7000001}
	if len(ports) != 1 || ports[0] != want {
		t.Errorf("port statistics: got %+v, want port 0 = %+v", ports, want)
	}
	if macs[0] != "56:48:4f:53:54:00" || len(macs) != 1 {
		t.Errorf("MACs: got %v", macs)
	}
	if len(fwd) != 1 {
		t.Fatalf("want 1 forward statistics, got %d", len(fwd))
	}
	f := fwd[0]
	if got, want := f.Ports[0], (FwdPortStats{18786519, 3, 18786522, 5, 7, 12}); got != want {
		t.Errorf("forward port 0: got %+v, want %+v", got, want)
	}
	if got, want := f.Ports[1], (FwdPortStats{4, 0, 4, 9, 0, 9}); got != want {
		t.Errorf("forward port 1: got %+v, want %+v", got, want)
	}
	if got, want := f.Total, (FwdPortStats{18786523, 3, 18786526, 14, 7, 21}); got != want {
		t.Errorf("forward total: got %+v, want %+v", got, want)
	}
}

func TestTxonlyFrameLayout(t *testing.T) {
	// The first 42 bytes of a 64-byte frame from a pcap of testpmd 22.11
	// (--eth-peer=0,02:11:22:33:44:55, port MAC 02:70:63:61:70:00).
	want := []byte{
		0x02, 0x11, 0x22, 0x33, 0x44, 0x55, 0x02, 0x70, 0x63, 0x61, 0x70, 0x00, 0x08, 0x00,
		0x45, 0x00, 0x00, 0x32, 0x00, 0x00, 0x00, 0x00, 0x40, 0x11, 0xee, 0x93,
		0xc6, 0x12, 0x00, 0x01, 0xc6, 0x12, 0x00, 0x02,
		0x00, 0x09, 0x00, 0x09, 0x00, 0x1e, 0x00, 0x00,
	}
	f, err := TxonlyFrame([]byte{2, 0x11, 0x22, 0x33, 0x44, 0x55}, []byte{2, 0x70, 0x63, 0x61, 0x70, 0}, 64)
	if err != nil {
		t.Fatal(err)
	}
	if len(f) != 64 || !bytes.Equal(f[:42], want) || !bytes.Equal(f[42:], make([]byte, 22)) {
		t.Fatalf("txonly frame:\n got % x\nwant % x + 22 zeros", f, want)
	}
	if _, err := TxonlyFrame(f[:6], f[6:12], 41); err == nil {
		t.Fatal("a 41-byte txonly frame was accepted")
	}
}

func TestTestpmdArgs(t *testing.T) {
	cfg := Config{
		Ports: []Port{
			{Kind: VirtioUser, Path: "/s0", Packed: true, InOrder: true, QueueSize: 1024, Queues: 2},
			{Kind: VhostUser, Path: "/s1", Client: true},
			{Kind: AFXDP, Iface: "veth0", StartQueue: 1},
		},
		Mode: "txonly", FrameSize: 128, FwdCPUs: []int{0}, Interactive: true,
	}
	cfg.setDefaults()
	args, err := cfg.args("/pmds", "xvsp")
	if err != nil {
		t.Fatal(err)
	}
	s := strings.Join(args, " ")
	for _, want := range []string{
		"-d /pmds --no-huge -m 256 --no-pci --file-prefix=xvsp --lcores=0@0,1@0",
		"--vdev net_virtio_user0,path=/s0,queues=2,server=0,packed_vq=1,mrg_rxbuf=0,in_order=1,queue_size=1024",
		"--vdev net_vhost1,iface=/s1,queues=1,client=1",
		"--vdev net_af_xdp2,iface=veth0,start_queue=1,queue_count=1",
		"-- -i --forward-mode=txonly --nb-cores=1 --total-num-mbufs=16384 --rxq=2 --txq=2 --txpkts=128",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("args lack %q:\n%s", want, s)
		}
	}
	if strings.Contains(s, "stats-period") {
		t.Errorf("interactive testpmd got --stats-period: %s", s)
	}

	// Hugepages in place of --no-huge, one file per memory list.
	cfg.HugeDir = "/dev/hugepages"
	if args, err = cfg.args("/pmds", "xvsp"); err != nil {
		t.Fatal(err)
	}
	if s, want := strings.Join(args, " "), "-d /pmds --huge-dir /dev/hugepages --single-file-segments -m 256 --no-pci"; !strings.Contains(s, want) || strings.Contains(s, "--no-huge") {
		t.Errorf("args with HugeDir lack %q or keep --no-huge:\n%s", want, s)
	}
	cfg.HugeDir = ""

	// Big rings get a pool that can fill them, and the memory for it.
	big := Config{Ports: []Port{
		{Kind: VirtioUser, Path: "/a", Queues: 2, QueueSize: 4096},
		{Kind: VirtioUser, Path: "/b", Queues: 2, QueueSize: 4096},
	}}
	big.setDefaults()
	if big.Mbufs < 2*2*4096*2 || big.MemoryMB*1<<20 < big.Mbufs*2176 {
		t.Errorf("4 queues of 4096: %d mbufs in %d MB", big.Mbufs, big.MemoryMB)
	}
}
