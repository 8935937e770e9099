package virtionet

import (
	"math/rand"
	"sync"
	"testing"
)

// TestSnapshotConcurrent: Snapshot and the call line's SetFD from another
// goroutine while the worker delivers and signals (run with -race), and
// counters only grow.
func TestSnapshotConcurrent(t *testing.T) {
	r := &fakeRing{notify: true}
	line, _ := callLine(t)
	q := NewRxQueue(r, QueueConfig{Features: featV1 | featMrg, Call: line})
	fd, _ := eventfd(t)
	f := &Frames{}
	for f.AddBytes(make([]byte, 100)) {
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		var last Stats
		for {
			select {
			case <-stop:
				return
			default:
			}
			line.SetFD(dupFD(t, fd))
			s := q.Snapshot()
			if s.Packets < last.Packets || s.Drops[DropNoRxBuffers] < last.Drops[DropNoRxBuffers] {
				t.Errorf("counters went back: %+v after %+v", s, last)
				return
			}
			last = s
		}
	}()
	for i := 0; i < 200; i++ {
		for j := 0; j < 16; j++ {
			r.add(nil, [][]byte{make([]byte, 2048)})
		}
		q.Deliver(f)
	}
	close(stop)
	wg.Wait()
	s := q.Snapshot()
	if s.Packets != 200*16 || s.Drops[DropNoRxBuffers] != 200*16 {
		t.Fatalf("stats %+v", s)
	}
}

func TestDropReasonNames(t *testing.T) {
	seen := map[string]bool{}
	for r := DropReason(0); r < NumDropReasons; r++ {
		n := r.String()
		if n == "" || n == "unknown" || seen[n] {
			t.Fatalf("reason %d has name %q", r, n)
		}
		seen[n] = true
	}
	if NumDropReasons.String() != "unknown" {
		t.Fatal("out-of-range reason has a name")
	}
}

// TestEmptyPollPublishesNothing: what an empty poll records (a TX queue's
// Receive passes 0 frames of 0 bytes) leaves nothing to publish, so the
// publish at the end of the poll does no atomic stores; a burst with frames
// still publishes, and Snapshot sees it.
func TestEmptyPollPublishesNothing(t *testing.T) {
	var c counters
	c.begin()
	c.pass(0, 0)
	if c.dirty {
		t.Fatal("an empty poll marked the counters changed")
	}
	g := newGuest(t, kindPacked, 64, 0)
	q := NewTxQueue(g.ring, QueueConfig{Index: 1, Features: featV1})
	if n, err := q.Receive(32); n != 0 || err != nil {
		t.Fatalf("Receive on an empty ring: %d, %v", n, err)
	}
	g.send(frame(rand.New(rand.NewSource(7)), 64), HeaderLen, hdrCombined)
	if n, err := q.Receive(32); n != 1 || err != nil {
		t.Fatalf("Receive: %d, %v", n, err)
	}
	if s := q.Snapshot(); s.Packets != 1 || s.Bytes != 64 {
		t.Fatalf("stats after one frame: %+v", s)
	}
}
