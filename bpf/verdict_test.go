package bpf

import (
	"net"
	"testing"
	"time"

	"github.com/cilium/ebpf"

	"github.com/xvswitch/xvswitch/test/require"
)

// loaded is the program and maps loaded but attached nowhere: frames are
// fed with BPF_PROG_TEST_RUN, so every verdict can be checked without a
// wire, including frames a veth would never deliver.
func loaded(tb testing.TB) *steerObjects {
	tb.Helper()
	require.Root(tb)
	var o steerObjects
	if err := loadSteerObjects(&o, nil); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = o.Close() })
	return &o
}

func frameTo(dst string) []byte {
	f := make([]byte, 60)
	m, err := net.ParseMAC(dst)
	if err != nil {
		panic(err)
	}
	copy(f, m)
	copy(f[6:], []byte{0x02, 0, 0, 0, 0, 0xaa})
	f[12], f[13] = 0x08, 0x00
	return f
}

func setCfg(tb testing.TB, o *steerObjects, p Policy) {
	tb.Helper()
	c := p.toC()
	if err := o.Config.Update(uint32(0), &c, ebpf.UpdateAny); err != nil {
		tb.Fatal(err)
	}
}

func readCounters(tb testing.TB, o *steerObjects) Counters {
	tb.Helper()
	var v []steerXvsCounters
	if err := o.Counters.Lookup(uint32(0), &v); err != nil {
		tb.Fatal(err)
	}
	return sumCounters(v)
}

const (
	vmMAC    = "02:00:00:00:00:01"
	otherMAC = "02:00:00:00:00:02"
	bcastMAC = "ff:ff:ff:ff:ff:ff"
	mcastMAC = "01:00:5e:01:02:03"
	v6mcMAC  = "33:33:00:00:00:01"
)

// The verdict and the one counter each kind of frame lands in, per policy.
func TestProgramVerdicts(t *testing.T) {
	o := loaded(t)
	k, _ := macKey(mustMAC(vmMAC))
	if err := o.Macs.Update(&k, &steerXvsMacOwner{Port: 1}, ebpf.UpdateAny); err != nil {
		t.Fatal(err)
	}
	type c = Counters
	steered := c{NoSocketPassed: 1} // no socket in slot 0: redirect falls back to pass
	cases := []struct {
		p    Policy
		dst  string
		want Counters
	}{
		{Policy{Mode: ModeNone}, vmMAC, c{NotOwnedPassed: 1}},
		{Policy{Mode: ModeNone, Broadcast: true}, bcastMAC, c{NotOwnedPassed: 1}},
		{Policy{Mode: ModeMAC}, vmMAC, steered},
		{Policy{Mode: ModeMAC}, otherMAC, c{NotOwnedPassed: 1}},
		{Policy{Mode: ModeMAC}, bcastMAC, c{GroupPassed: 1}},
		{Policy{Mode: ModeMAC}, mcastMAC, c{GroupPassed: 1}},
		{Policy{Mode: ModeMAC}, v6mcMAC, c{GroupPassed: 1}},
		{Policy{Mode: ModeMAC, Broadcast: true}, bcastMAC, c{NoSocketPassed: 1, SteeredBroadcast: 1}},
		{Policy{Mode: ModeMAC, Broadcast: true}, mcastMAC, c{GroupPassed: 1}},
		{Policy{Mode: ModeMAC, Multicast: true}, mcastMAC, c{NoSocketPassed: 1, SteeredMulticast: 1}},
		{Policy{Mode: ModeMAC, Multicast: true}, v6mcMAC, c{NoSocketPassed: 1, SteeredMulticast: 1}},
		{Policy{Mode: ModeMAC, Multicast: true}, bcastMAC, c{GroupPassed: 1}},
		{Policy{Mode: ModeAll}, otherMAC, steered},
		{Policy{Mode: ModeAll}, bcastMAC, c{NoSocketPassed: 1, SteeredBroadcast: 1}},
		{Policy{Mode: ModeAll}, v6mcMAC, c{NoSocketPassed: 1, SteeredMulticast: 1}},
		{Policy{Mode: 7}, vmMAC, c{NotOwnedPassed: 1}}, // unknown modes steer nothing
	}
	for _, tc := range cases {
		setCfg(t, o, tc.p)
		before := readCounters(t, o)
		ret, err := o.XvsSteer.Run(&ebpf.RunOptions{Data: frameTo(tc.dst)})
		if err != nil {
			t.Fatal(err)
		}
		if ret != 2 { // XDP_PASS: a steered frame with no socket too
			t.Errorf("%v, frame to %s: verdict %d, want XDP_PASS", tc.p, tc.dst, ret)
		}
		if d := readCounters(t, o).Sub(before); d != tc.want {
			t.Errorf("%v, frame to %s: counted %+v, want %+v", tc.p, tc.dst, d, tc.want)
		}
	}
}

func mustMAC(s string) net.HardwareAddr {
	m, err := net.ParseMAC(s)
	if err != nil {
		panic(err)
	}
	return m
}

// BenchmarkProgram is the program's own cost per frame (BPF_PROG_TEST_RUN
// in a kernel loop), by path.
func BenchmarkProgram(b *testing.B) {
	o := loaded(b)
	k, _ := macKey(mustMAC(vmMAC))
	if err := o.Macs.Update(&k, &steerXvsMacOwner{Port: 1}, ebpf.UpdateAny); err != nil {
		b.Fatal(err)
	}
	setHostAddrs(b, o, hostIP4, hostIP6)
	bm := Policy{Mode: ModeMAC, Broadcast: true, Multicast: true}
	for _, bc := range []struct {
		name  string
		p     Policy
		frame []byte
	}{
		{"mac-hit", Policy{Mode: ModeMAC}, frameTo(vmMAC)},
		{"mac-hit-groups-steered", bm, frameTo(vmMAC)},
		{"mac-miss", Policy{Mode: ModeMAC}, frameTo(otherMAC)},
		{"broadcast-steered", Policy{Mode: ModeMAC, Broadcast: true}, frameTo(bcastMAC)},
		{"broadcast-passed", Policy{Mode: ModeMAC}, frameTo(bcastMAC)},
		{"arp-for-vm-steered", bm, arpFrame(bcastMAC, false, 1, "10.0.0.2", vmIP4)},
		{"arp-for-host-passed", bm, arpFrame(bcastMAC, false, 1, "10.0.0.2", hostIP4)},
		{"ns-for-vm-steered", bm, nsFrame("33:33:ff:00:00:09", false, vmIP6)},
		{"ns-for-host-passed", bm, nsFrame(snmHost6, false, hostIP6)},
		{"all", Policy{Mode: ModeAll}, frameTo(otherMAC)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			setCfg(b, o, bc.p)
			f := bc.frame
			const perRun = 100000
			var total time.Duration
			runs := 0
			for b.Loop() {
				_, d, err := o.XvsSteer.Benchmark(f, perRun, nil)
				if err != nil {
					b.Fatal(err)
				}
				total += d * perRun // Benchmark returns the time per run
				runs++
			}
			b.ReportMetric(float64(total.Nanoseconds())/float64(runs*perRun), "ns/frame")
		})
	}
}
