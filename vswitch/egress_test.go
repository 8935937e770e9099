package vswitch

import (
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"github.com/xvswitch/xvswitch/ctl"
)

// mqSink is a port with several egress queues and no ingress; each queue
// records the frames it was sent, without a lock of its own: the switch's
// egress locking is what keeps two workers off one queue (the race
// detector checks it).
type mqSink struct{ qs []*mqQueue }

type mqQueue struct {
	down bool     // not running (a queue pair the guest did not enable)
	got  [][]byte // copies of the frames sent
	n    int
}

func newMQSink(queues int) *mqSink {
	s := &mqSink{}
	for i := 0; i < queues; i++ {
		s.qs = append(s.qs, &mqQueue{})
	}
	return s
}

func (s *mqSink) IngressQueues() []IngressQueue { return nil }
func (s *mqSink) EgressQueues() []EgressQueue {
	var out []EgressQueue
	for _, q := range s.qs {
		out = append(out, q)
	}
	return out
}
func (s *mqSink) Info() ctl.PortInfo { return ctl.PortInfo{Kind: "mqsink", Queues: len(s.qs)} }
func (s *mqSink) Fail(error)         {}
func (s *mqSink) Close() error       { return nil }

func (q *mqQueue) running() bool { return !q.down }

func (q *mqQueue) Transmit(b *Burst, m Mask, c *Counts) {
	for rest := m; rest != 0; rest &= rest - 1 {
		f := b.Frame(rest.Lowest())
		if q.got != nil || q.n < 0 {
			buf := make([]byte, f.Len())
			f.CopyTo(buf)
			q.got = append(q.got, buf)
		}
		q.n++
		c.Frame(f.Len())
	}
}

// udpFrame is an IPv4 UDP frame from src to dst with source port sport,
// its payload seq.
func udpFrame(dst, src uint64, sport uint16, seq int) []byte {
	f := ethFrame(dst, src, "")[:12]
	f = append(f, 0x08, 0x00)
	ip := make([]byte, 20+8+4)
	ip[0], ip[9] = 0x45, 17
	copy(ip[12:16], []byte{10, 0, 0, 1})
	copy(ip[16:20], []byte{10, 0, 0, 2})
	binary.BigEndian.PutUint16(ip[20:22], sport)
	binary.BigEndian.PutUint16(ip[22:24], 4789)
	binary.BigEndian.PutUint32(ip[28:32], uint32(seq))
	return append(f, ip...)
}

// TestEgressSpreadsFlows: one worker sends to a guest with four queue
// pairs, one of them not enabled: every flow goes to one enabled queue,
// in order, and the flows use all three.
func TestEgressSpreadsFlows(t *testing.T) {
	s, err := New(Config{Workers: 1, Ctl: "x"})
	if err != nil {
		t.Fatal(err)
	}
	a, m := newFakePort(), newMQSink(4)
	for _, q := range m.qs {
		q.got = [][]byte{}
	}
	m.qs[2].down = true
	s.addPort("a", a, 0)
	s.addPort("m", m, 0)
	const macM, macA = 0x0200_0000_0002, 0x0200_0000_0001
	s.fdb.AddStatic(macM, 1)
	w := s.workers[0]
	const flows, per = 24, 8
	for seq := 0; seq < per; seq++ {
		var burst [][]byte
		for fl := 0; fl < flows; fl++ {
			burst = append(burst, udpFrame(macM, macA, uint16(1000+fl), seq))
		}
		a.put(burst...)
		snap := s.snap.Load()
		if n, _ := w.forward(snap, snap.polls[0][0]); n != flows {
			t.Fatalf("forwarded %d of %d", n, flows)
		}
	}
	queueOf := map[uint16]int{}
	next := map[uint16]uint32{}
	for qi, q := range m.qs {
		if qi == 2 && len(q.got) > 0 {
			t.Fatalf("the queue not running got %d frames", len(q.got))
		}
		if qi != 2 && len(q.got) == 0 {
			t.Errorf("queue %d got nothing of %d flows", qi, flows)
		}
		for _, f := range q.got {
			sport := binary.BigEndian.Uint16(f[34:36])
			seq := binary.BigEndian.Uint32(f[42:46])
			if prev, ok := queueOf[sport]; ok && prev != qi {
				t.Fatalf("flow %d on queues %d and %d", sport, prev, qi)
			}
			queueOf[sport] = qi
			if seq != next[sport] {
				t.Fatalf("flow %d: frame %d after %d", sport, seq, next[sport])
			}
			next[sport]++
		}
	}
	if len(queueOf) != flows {
		t.Fatalf("%d flows arrived, want %d", len(queueOf), flows)
	}
	balance(t, s)
}

// TestEgressShares: each worker's share of a port's queues.
func TestEgressShares(t *testing.T) {
	for _, c := range []struct {
		queues, workers int
		want            string
	}{
		{4, 1, "[[0 1 2 3]]"},
		{4, 2, "[[0 2] [1 3]]"},
		{3, 2, "[[0 2] [1]]"},
		{1, 3, "[[0] [0] [0]]"},
		{2, 3, "[[0] [1] [0]]"},
	} {
		p := newPort(0, "m", newMQSink(c.queues))
		p.spread(c.workers)
		var got [][]int
		for _, share := range p.outBy {
			var qs []int
			for _, eg := range share {
				for i, o := range p.out {
					if o == eg {
						qs = append(qs, i)
					}
				}
			}
			got = append(got, qs)
		}
		if s := fmt.Sprint(got); s != c.want {
			t.Errorf("%d queues, %d workers: %s, want %s", c.queues, c.workers, s, c.want)
		}
	}
	// A port whose queues do not ask to be spread (a NIC's): one queue
	// per worker.
	p := newPort(0, "nic", &sinkPorts{n: 4})
	p.spread(2)
	if len(p.outBy[0]) != 1 || p.outBy[0][0] != p.out[0] || len(p.outBy[1]) != 1 || p.outBy[1][0] != p.out[1] {
		t.Errorf("a NIC-like port's shares: %v", p.outBy)
	}
}

// sinkPorts is a port with n egress queues that do not ask to be spread.
type sinkPorts struct{ n int }

func (s *sinkPorts) IngressQueues() []IngressQueue { return nil }
func (s *sinkPorts) EgressQueues() []EgressQueue {
	var qs []EgressQueue
	for i := 0; i < s.n; i++ {
		qs = append(qs, &sinkPort{})
	}
	return qs
}
func (s *sinkPorts) Info() ctl.PortInfo { return ctl.PortInfo{Kind: "sinks"} }
func (s *sinkPorts) Fail(error)         {}
func (s *sinkPorts) Close() error       { return nil }

// TestSoloHandOver: with two workers, a port is added and deleted again
// and again under traffic, so the worker that alone transmits (without
// egress locks) changes back and forth; two ports' frames meet in one
// egress queue that has no lock of its own. The race detector (make race)
// sees any transmit of two workers not ordered by the switch's locks or
// snapshots; the counters balance.
func TestSoloHandOver(t *testing.T) {
	s := startTestSwitch(t, Config{Workers: 2, IdleAfter: -1})
	a := newFakePort()
	sink := newMQSink(1)
	if _, err := s.addPort("a", a, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.addPort("sink", sink, 0); err != nil {
		t.Fatal(err)
	}
	const macS = 0x0200_0000_0099
	s.fdb.AddStatic(macS, 1)
	stop := make(chan struct{})
	done := make(chan struct{})
	feed := func(p *fakePort, src uint64) {
		for i := 0; i < 64; i++ {
			p.put(ethFrame(macS, src, "x"))
		}
	}
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			feed(a, 0x0200_0000_0001)
			time.Sleep(100 * time.Microsecond)
		}
	}()
	var gone []*port // b's counters stay readable after the delete
	for i := 0; i < 20; i++ {
		// b has frames before it is added: the worker that polls it
		// transmits as soon as it sees the new port table.
		b := newFakePort()
		feed(b, 0x0200_0000_0002)
		pb, err := s.addPort("b", b, 0)
		if err != nil {
			t.Fatal(err)
		}
		gone = append(gone, pb)
		if solo := s.snap.Load().solo; solo != -1 {
			t.Fatalf("two workers poll, solo is %d", solo)
		}
		time.Sleep(2 * time.Millisecond)
		feed(b, 0x0200_0000_0002)
		if err := s.DelPort("b"); err != nil {
			t.Fatal(err)
		}
		if solo := s.snap.Load().solo; solo != 0 {
			t.Fatalf("only worker 0 polls, solo is %d", solo)
		}
	}
	close(stop)
	<-done
	waitFor(t, "a's frames forwarded", func() bool { a.mu.Lock(); defer a.mu.Unlock(); return len(a.pending) == 0 })
	// Every frame a and the b's received reached the sink (b's counters
	// are final: its delete waited for the workers to let go of it).
	time.Sleep(20 * time.Millisecond)
	s.mu.Lock()
	defer s.mu.Unlock()
	rx := s.ports[0].stats[0].RxPackets.Load()
	for _, p := range gone {
		rx += p.stats[0].RxPackets.Load()
	}
	if tx := s.ports[1].stats[0].TxPackets.Load(); tx != rx || uint64(sink.qs[0].n) != rx || rx == 0 {
		t.Fatalf("received %d, transmitted %d, the sink got %d", rx, tx, sink.qs[0].n)
	}
}
