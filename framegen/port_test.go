package framegen

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"net"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/xvswitch/xvswitch/ctl"
	"github.com/xvswitch/xvswitch/portspec"
	"github.com/xvswitch/xvswitch/vswitch"
)

// TestFrame: the generated frame is an IPv4/UDP frame with a valid header
// checksum and the lengths of its size.
func TestFrame(t *testing.T) {
	dst, _ := net.ParseMAC("02:00:00:00:00:01")
	src, _ := net.ParseMAC("02:00:00:00:00:fe")
	f := Frame(dst, src, 100)
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

func TestNewRejectsWhatCannotBeBuilt(t *testing.T) {
	for _, bad := range []portspec.Gen{
		{Name: "g", Size: 64, Dst: "zz"},
		{Name: "g", Size: 64, Dst: "02:00:00:00:00:01", Src: "nope"},
		{Name: "g", Size: portspec.GenMinFrame - 1, Dst: "02:00:00:00:00:01"},
		{Name: "g", Size: portspec.GenMaxFrame + 1, Dst: "02:00:00:00:00:01"},
	} {
		if _, err := New(bad); !errors.Is(err, ErrBadGen) {
			t.Errorf("New(%+v): err %v, want ErrBadGen", bad, err)
		}
	}
	p, err := New(portspec.Gen{Name: "g", Size: 64, Dst: "02:00:00:00:00:01"})
	if err != nil || p.Info().Detail != "benchmark generator size=64 dst=02:00:00:00:00:01 src="+portspec.GenDefaultSrc {
		t.Fatalf("default source: %+v %v", p.Info(), err)
	}
}

// gate is a sink port for the forwarding test: it takes frames until it
// holds want, then blocks the worker inside Transmit until released, so
// the test reads counters that belong together (every earlier burst
// flushed on both sides, the blocked one on neither).
type gate struct {
	mu      sync.Mutex
	got     [][]byte
	want    int
	full    chan struct{} // closed when want frames arrived
	release chan struct{}
	once    sync.Once
}

func (g *gate) IngressQueues() []vswitch.IngressQueue { return nil }
func (g *gate) EgressQueues() []vswitch.EgressQueue   { return []vswitch.EgressQueue{g} }
func (g *gate) Info() ctl.PortInfo                    { return ctl.PortInfo{Kind: "gate"} }
func (g *gate) Fail(error)                            {}
func (g *gate) Close() error                          { return nil }

func (g *gate) Transmit(b *vswitch.Burst, m vswitch.Mask, c *vswitch.Counts) {
	g.mu.Lock()
	if len(g.got) >= g.want {
		g.mu.Unlock()
		g.once.Do(func() { close(g.full) })
		<-g.release
		c.DropN(vswitch.DropNoRxBuffers, m.Count())
		return
	}
	for rest := m; rest != 0; rest &= rest - 1 {
		f := b.Frame(rest.Lowest())
		buf := make([]byte, f.Len())
		f.CopyTo(buf)
		g.got = append(g.got, buf)
		c.Frame(f.Len())
	}
	g.mu.Unlock()
}

// TestForwardsThroughASwitch: a generator sends its frame to the port that
// owns its destination MAC as fast as it is polled, a full burst per poll,
// and the switch's counters balance.
func TestForwardsThroughASwitch(t *testing.T) {
	gen, err := New(portspec.Gen{Name: "gen", Size: 64, Dst: "02:00:00:00:00:01", Src: "02:00:00:00:00:02"})
	if err != nil {
		t.Fatal(err)
	}
	sw, err := vswitch.New(vswitch.Config{Ctl: filepath.Join(t.TempDir(), "ctl.sock"), Others: []vswitch.NamedPort{{Name: "gen", Driver: gen}}})
	if err != nil {
		t.Fatal(err)
	}
	g := &gate{want: 500, full: make(chan struct{}), release: make(chan struct{})}
	// The gate owns the generator's destination MAC: unicast on the bridge.
	if err := sw.AddPort("gate", g, 0x020000000001); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sw.Run(ctx) }()
	defer func() {
		cancel()
		close(g.release)
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	select {
	case <-g.full:
	case <-time.After(10 * time.Second):
		t.Fatal("the generator did not deliver 500 frames in 10 s")
	}
	want := Frame(net.HardwareAddr{2, 0, 0, 0, 0, 1}, net.HardwareAddr{2, 0, 0, 0, 0, 2}, 64)
	if got := g.got[499]; !bytes.Equal(got, want) {
		t.Errorf("frame at the sink:\n% x\nwant\n% x", got, want)
	}
	var genC, gateC ctl.PortCounters
	for _, p := range sw.Stats() {
		switch p.Name {
		case "gen":
			genC = p
		case "gate":
			gateC = p
		}
	}
	// 500 is not a whole number of bursts: the burst that crossed it was
	// taken whole, so the gate holds 512.
	if genC.RxPackets != 512 || gateC.TxPackets != 512 || len(g.got) != 512 {
		t.Errorf("generator received %d; gate transmitted %d, holds %d; want 16 bursts of %d", genC.RxPackets, gateC.TxPackets, len(g.got), vswitch.MaxBurst)
	}
}

func TestReceiveAndTransmitAllocs(t *testing.T) {
	p, err := New(portspec.Gen{Name: "g", Size: 64, Dst: "02:00:00:00:00:01"})
	if err != nil {
		t.Fatal(err)
	}
	in, out := p.IngressQueues()[0], p.EgressQueues()[0]
	var b vswitch.Burst
	var c vswitch.Counts
	if n := testing.AllocsPerRun(100, func() {
		if n, _ := in.Receive(&b, &c); n != vswitch.MaxBurst {
			t.Fatalf("a poll gave %d frames, want a full burst", n)
		}
		out.Transmit(&b, 0xffff_ffff, &c)
	}); n != 0 {
		t.Errorf("%v allocations per burst", n)
	}
	if w := in.Waker(); w.FD >= 0 {
		t.Errorf("a generator's worker must never sleep: waker fd %d", w.FD)
	}
}
