package vswitch

import (
	"bytes"
	"encoding/binary"
	"net"
	"testing"
)

func TestParseGen(t *testing.T) {
	g, err := ParseGen("g0,size=1518,dst=02:00:00:00:00:01")
	if err != nil {
		t.Fatal(err)
	}
	if g.Name != "g0" || g.Size != 1518 || g.Dst != "02:00:00:00:00:01" || g.Src != genDefaultSrc {
		t.Fatalf("parsed %+v", g)
	}
	g, err = ParseGen("g1,dst=02:00:00:00:00:01,src=02:00:00:00:00:09")
	if err != nil || g.Size != 64 || g.Src != "02:00:00:00:00:09" {
		t.Fatalf("defaults: %+v %v", g, err)
	}
	for _, bad := range []string{"g", "g,size=41,dst=02:00:00:00:00:01", "g,size=9019,dst=02:00:00:00:00:01",
		"g,dst=zz", "g,dst=02:00:00:00:00:01,colour=red", ",dst=02:00:00:00:00:01"} {
		if _, err := ParseGen(bad); err == nil {
			t.Errorf("ParseGen(%q) accepted", bad)
		}
	}
}

// TestGenFrameIsTxonlyFrame: the generated frame is an IPv4/UDP frame with
// a valid header checksum and the lengths of its size.
func TestGenFrame(t *testing.T) {
	dst, _ := net.ParseMAC("02:00:00:00:00:01")
	src, _ := net.ParseMAC("02:00:00:00:00:fe")
	f := genFrame(dst, src, 100)
	if len(f) != 100 || !bytes.Equal(f[0:6], dst) || !bytes.Equal(f[6:12], src) {
		t.Fatalf("frame % x", f[:14])
	}
	if binary.BigEndian.Uint16(f[16:]) != 86 || binary.BigEndian.Uint16(f[38:]) != 66 {
		t.Errorf("IPv4 length %d, UDP length %d", binary.BigEndian.Uint16(f[16:]), binary.BigEndian.Uint16(f[38:]))
	}
	var sum uint32
	for i := 14; i < 34; i += 2 {
		sum += uint32(binary.BigEndian.Uint16(f[i:]))
	}
	for sum > 0xffff {
		sum = sum>>16 + sum&0xffff
	}
	if sum != 0xffff {
		t.Errorf("IPv4 header checksum does not verify: %#x", sum)
	}
}

// TestGenPortForwards: a generator sends its frame to the port that owns
// its destination MAC as fast as it is polled, and the counters balance (what the fake port could not take
// is a drop with a reason); frames sent to the generator are counted as
// transmitted.
func TestGenPortForwards(t *testing.T) {
	s, err := New(Config{Ctl: "unused"})
	if err != nil {
		t.Fatal(err)
	}
	s.startWorkers()
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			s.stopWorkers()
		}
	})
	sink := newFakePort()
	sink.room = 500
	// The sink owns the generator's destination MAC: unicast on the bridge.
	if _, err = s.addPort("sink", sink, 0x020000000001); err != nil {
		t.Fatal(err)
	}
	if err := s.AddGen(GenSpec{Name: "gen", Size: 64, Dst: "02:00:00:00:00:01", Src: "02:00:00:00:00:02"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "500 generated frames at the sink", func() bool { return len(sink.frames()) >= 500 })
	want := genFrame(net.HardwareAddr{2, 0, 0, 0, 0, 1}, net.HardwareAddr{2, 0, 0, 0, 0, 2}, 64)
	if got := sink.frames()[499]; !bytes.Equal(got, want) {
		t.Errorf("frame at the sink:\n% x\nwant\n% x", got, want)
	}
	sink.put(ethFrame(0x020000000002, 0x020000000003, "to the generator (its source MAC, learned)"))
	waitFor(t, "the generator's sink side to count a frame", func() bool {
		for _, p := range s.Stats() {
			if p.Name == "gen" && p.TxPackets == 1 {
				return true
			}
		}
		return false
	})
	// The generator never pauses: stop the workers to read counters that
	// belong together.
	s.stopWorkers()
	stopped = true
	var gen, sk PortCounters
	for _, p := range s.Stats() {
		switch p.Name {
		case "gen":
			gen = p
		case "sink":
			sk = p
		}
	}
	if gen.RxPackets < 500 || gen.RxPackets != sk.TxPackets+sk.Drops["no_rx_buffers"] || sk.TxPackets != 500 {
		t.Errorf("generator received %d; sink transmitted %d, dropped %v", gen.RxPackets, sk.TxPackets, sk.Drops)
	}
	balance(t, s)
}

func TestGenReceiveAllocs(t *testing.T) {
	q := &genQueue{frame: make([]byte, 64)}
	var fb frameBurst
	var c burstCounts
	if n := testing.AllocsPerRun(100, func() {
		_, _ = q.receive(&fb, &c)
		q.transmit(&fb, 0xffff_ffff, &c)
	}); n != 0 {
		t.Errorf("%v allocations per burst", n)
	}
}
