package vswitch

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/xvswitch/xvswitch/ctl"
	"github.com/xvswitch/xvswitch/portspec"
)

func ethFrame(dst, src uint64, payload string) []byte {
	b := make([]byte, 14, 14+len(payload))
	for i := 0; i < 6; i++ {
		b[i] = byte(dst >> (40 - 8*i))
		b[6+i] = byte(src >> (40 - 8*i))
	}
	b[12], b[13] = 0x88, 0xb5 // local experimental ethertype
	return append(b, payload...)
}

const bcast = 0xffff_ffff_ffff

// startTestSwitch runs a switch's workers and housekeeping for a test.
func startTestSwitch(t *testing.T, cfg Config) *Switch {
	t.Helper()
	cfg.Ctl = "unused"
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s.startWorkers()
	ctx, cancel := context.WithCancel(context.Background())
	go s.housekeep(ctx)
	// As Run ends: the ports go first, so a test leaves no listener,
	// eventfd or socket behind to open and close fds under the next
	// test's leak checks.
	t.Cleanup(func() {
		s.removeAll()
		cancel()
		s.stopWorkers()
	})
	return s
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// balance checks received + flood copies = transmitted + dropped, over all ports.
func balance(t *testing.T, s *Switch) {
	t.Helper()
	// A burst's egress counters are flushed before its ingress ones, and a
	// guest may see a frame before either: a test that just received its
	// last frame can catch a burst half counted. The counters settle once
	// the burst ends, so wait for that, a bounded while.
	var rx, tx, dropped, flood uint64
	for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(time.Millisecond) {
		rx, tx, dropped, flood = 0, 0, 0, 0
		for _, p := range s.Stats() {
			rx += p.RxPackets
			tx += p.TxPackets
			flood += p.FloodCopies + p.SegmentCopies // segment.go
			for _, n := range p.Drops {
				dropped += n
			}
		}
		if rx+flood == tx+dropped || time.Now().After(deadline) {
			break
		}
	}
	if rx+flood != tx+dropped {
		t.Fatalf("accounting: rx %d + flood and segment copies %d != tx %d + dropped %d\n%+v", rx, flood, tx, dropped, s.Stats())
	}
}

func TestLearningBridge(t *testing.T) {
	s := startTestSwitch(t, Config{Workers: 2})
	a, b, c := newFakePort(), newFakePort(), newFakePort()
	for i, f := range []*fakePort{a, b, c} {
		if _, err := s.addPort(string(rune('a'+i)), f, 0); err != nil {
			t.Fatal(err)
		}
	}
	const macA, macB, macX = 0x0200_0000_000a, 0x0200_0000_000b, 0x0200_0000_00ff
	// A broadcast floods to every other port and teaches the FDB where A is.
	a.put(ethFrame(bcast, macA, "hello"))
	waitFor(t, "flood", func() bool { return len(b.frames()) == 1 && len(c.frames()) == 1 })
	// B answers A: unicast, only a gets it.
	b.put(ethFrame(macA, macB, "reply"))
	waitFor(t, "unicast", func() bool { return len(a.frames()) == 1 })
	if got := a.frames()[0]; !bytes.Equal(got, ethFrame(macA, macB, "reply")) {
		t.Fatalf("a got %x", got)
	}
	// Unknown unicast floods, never back out of the ingress port.
	c.put(ethFrame(macX, 0x0200_0000_000c, "who"))
	waitFor(t, "unknown unicast flood", func() bool { return len(a.frames()) == 2 && len(b.frames()) == 2 })
	// A frame to a MAC that lives on the ingress port is a hairpin drop;
	// a runt is malformed.
	a.put(ethFrame(macA, 0x0200_0000_0010, "loop"), []byte{1, 2, 3})
	waitFor(t, "drops", func() bool {
		st := s.Stats()
		for _, p := range st {
			if p.Name == "a" {
				return p.Drops["hairpin"] == 1 && p.Drops["malformed"] == 1
			}
		}
		return false
	})
	time.Sleep(20 * time.Millisecond)
	if len(c.frames()) != 1 || len(b.frames()) != 2 {
		t.Fatalf("stray frames: b %d, c %d", len(b.frames()), len(c.frames()))
	}
	if s.fdb.Lookup(macA) != 0 || s.fdb.Lookup(macB) != 1 {
		t.Fatalf("fdb: A on %d, B on %d", s.fdb.Lookup(macA), s.fdb.Lookup(macB))
	}
	balance(t, s)
}

func TestCrossConnectAndEgressDrops(t *testing.T) {
	s := startTestSwitch(t, Config{Workers: 1, XConnects: []portspec.XConnect{{A: "d", B: "e"}},
		NICs: []portspec.NIC{{Name: "d"}}, Vhosts: []portspec.Vhost{{Name: "e"}}})
	d, e, bridged := newFakePort(), newFakePort(), newFakePort()
	s.addPort("d", d, 0)
	s.addPort("e", e, 0)
	s.addPort("br", bridged, 0)
	e.room = 2 // e's guest has room for two frames only
	for i := 0; i < 5; i++ {
		d.put(ethFrame(bcast, 0x0200_0000_0001, "x"))
	}
	waitFor(t, "cross-connect", func() bool {
		st := s.Stats()
		return len(st) == 3 && st[1].TxPackets == 2 && st[1].Drops["no_rx_buffers"] == 3
	})
	if len(bridged.frames()) != 0 {
		t.Fatalf("a cross-connected port's broadcast reached the bridge")
	}
	// The bridge port alone on the bridge: its floods have no destination.
	bridged.put(ethFrame(bcast, 0x0200_0000_0002, "alone"))
	waitFor(t, "no destination", func() bool { return s.Stats()[2].Drops["no_destination"] == 1 })
	balance(t, s)
	if err := s.DelPort("e"); err != nil || !e.closed {
		t.Fatalf("DelPort: %v, closed %v", err, e.closed)
	}
	d.put(ethFrame(bcast, 0x0200_0000_0001, "orphan"))
	waitFor(t, "orphan drop", func() bool { return s.Stats()[0].Drops["no_destination"] == 1 })
}

func TestIdleWorkerSleepsAndWakes(t *testing.T) {
	s := startTestSwitch(t, Config{Workers: 1, IdleAfter: time.Millisecond})
	a, b := newFakePort(), newFakePort()
	s.addPort("a", a, 0)
	s.addPort("b", b, 0)
	waitFor(t, "worker to sleep", func() bool { return s.workers[0].sleeps.Load() > 0 })
	for i := 0; i < 3; i++ {
		// Let it settle into epoll (it stays there: no timeout), then
		// wake it with traffic; it goes back to sleep after.
		waitFor(t, "worker asleep", func() bool { return s.workers[0].asleepAt.Load() != 0 })
		before := s.workers[0].sleeps.Load()
		a.put(ethFrame(bcast, 0x0200_0000_0001, "wake"))
		waitFor(t, "delivery after sleep", func() bool { return len(b.frames()) == i+1 })
		waitFor(t, "worker to sleep again", func() bool { return s.workers[0].sleeps.Load() > before })
	}
	balance(t, s)
}

func TestForwardAllocs(t *testing.T) {
	if n := newBurstRig(t).allocsPerBurst(t, 200); n != 0 {
		t.Fatalf("%v allocations per burst", n)
	}
}

// burstRig is a switch with a port a whose frames go to a sink port b,
// and a worker to forward bursts of a's frames by hand.
type burstRig struct {
	s      *Switch
	w      *worker
	a      *fakePort
	sink   *sinkPort
	frames [][]byte
}

func newBurstRig(tb testing.TB) *burstRig {
	s, err := New(Config{Workers: 1, Ctl: "x"})
	if err != nil {
		tb.Fatal(err)
	}
	r := &burstRig{s: s, w: s.workers[0], a: newFakePort(), sink: &sinkPort{}}
	s.addPort("a", r.a, 0)
	s.addPort("b", r.sink, 0)
	s.fdb.AddStatic(0x0200_0000_0002, 1)
	for i := 0; i < MaxBurst; i++ {
		r.frames = append(r.frames, ethFrame(0x0200_0000_0002, 0x0200_0000_0001, "0123456789012345678901234567890123456789012345678901"))
	}
	return r
}

// burst forwards one burst of MaxBurst frames from a.
func (r *burstRig) burst() int {
	snap := r.s.snap.Load()
	r.a.pending = r.frames
	n, _ := r.w.forward(snap, snap.polls[0][0])
	return n
}

// allocsPerBurst forwards runs bursts (and one more to warm up), checks
// they all reached the sink, and returns the allocations per burst.
func (r *burstRig) allocsPerBurst(t *testing.T, runs int) float64 {
	t.Helper()
	before := r.sink.n
	n := testing.AllocsPerRun(runs, func() {
		if got := r.burst(); got != MaxBurst {
			t.Fatalf("forwarded %d", got)
		}
	})
	if got := r.sink.n - before; got != (runs+1)*MaxBurst {
		t.Fatalf("sink got %d frames of %d", got, (runs+1)*MaxBurst)
	}
	return n
}

// sinkPort counts what it is sent, without allocating.
type sinkPort struct{ n int }

func (p *sinkPort) IngressQueues() []IngressQueue { return nil }
func (p *sinkPort) EgressQueues() []EgressQueue   { return []EgressQueue{p} }
func (p *sinkPort) Info() ctl.PortInfo            { return ctl.PortInfo{Kind: "sink"} }
func (p *sinkPort) Fail(error)                    {}
func (p *sinkPort) Close() error                  { return nil }
func (p *sinkPort) Transmit(fb *Burst, m Mask, c *Counts) {
	p.n += m.Count()
	c.Frames(uint64(m.Count()), 0)
}

func BenchmarkForwardBurst32(b *testing.B) {
	r := newBurstRig(b)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r.burst()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*MaxBurst), "ns/frame")
}

// TestBurstsCounted: each queue counts the bursts that moved frames, so
// that frames / bursts is the average burst (show stats, metrics): 40
// frames offered at once make a full burst of 32 and one of 8 on the way
// in and out; a runt alone is a burst in (received, then dropped) and
// none out; the empty polls in between count nothing.
func TestBurstsCounted(t *testing.T) {
	s, d, e := crossConnected(t)
	var frames [][]byte
	for range 40 {
		frames = append(frames, ethFrame(bcast, 0x0200_0000_0001, "x"))
	}
	d.put(frames...)
	waitFor(t, "40 frames across", func() bool { return len(e.frames()) == 40 })
	d.put([]byte{1, 2, 3}) // malformed: received and dropped
	waitFor(t, "the runt dropped", func() bool { return s.Stats()[0].Drops["malformed"] == 1 })
	balance(t, s)
	st := s.Stats()
	if got, want := st[0].Bursts, (ctl.Bursts{RxBursts: 3}); got != want {
		t.Errorf("d: %+v, want %+v", got, want)
	}
	if got, want := st[1].Bursts, (ctl.Bursts{TxBursts: 2}); got != want {
		t.Errorf("e: %+v, want %+v", got, want)
	}
	if pb := ctl.PerBurst(st[1].TxPackets, st[1].TxBursts); pb != 20 {
		t.Errorf("e: %.1f frames per burst, want 20", pb)
	}
}

// TestCrossConnectRunts: a cross-connect without port security reads no
// frame, but a runt still counts as malformed at its ingress, and the
// frames around it go on as they came.
func TestCrossConnectRunts(t *testing.T) {
	s, d, e := crossConnected(t)
	first, last := ethFrame(0x0200_0000_0002, 0x0200_0000_0001, "first"), ethFrame(bcast, 0x0200_0000_0003, "last")
	d.put(first, make([]byte, ethHeaderLen-1), last)
	waitFor(t, "two frames across", func() bool { return len(e.frames()) == 2 })
	// A burst's counters are flushed after its frames reach the partner:
	// wait for its ingress flush (the runt's drop), the last one.
	waitFor(t, "the runt counted", func() bool { return s.Stats()[0].Drops["malformed"] == 1 })
	balance(t, s)
	if got := e.frames(); !bytes.Equal(got[0], first) || !bytes.Equal(got[1], last) {
		t.Errorf("e got %x", got)
	}
	st := s.Stats()
	if st[0].RxPackets != 3 || st[0].RxBytes != uint64(len(first)+ethHeaderLen-1+len(last)) || st[0].Drops["malformed"] != 1 || st[1].TxPackets != 2 {
		t.Errorf("counters: %+v", st)
	}
}

// crossConnected is a one-worker switch whose fake ports d and e are
// cross-connected, neither with port security.
func crossConnected(t *testing.T) (*Switch, *fakePort, *fakePort) {
	t.Helper()
	s := startTestSwitch(t, Config{Workers: 1, XConnects: []portspec.XConnect{{A: "d", B: "e"}},
		NICs: []portspec.NIC{{Name: "d"}}, Vhosts: []portspec.Vhost{{Name: "e"}}})
	d, e := newFakePort(), newFakePort()
	s.addPort("d", d, 0)
	s.addPort("e", e, 0)
	return s, d, e
}
