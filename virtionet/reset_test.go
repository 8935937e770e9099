package virtionet

import (
	"math/rand"
	"testing"
)

// TestRebind: what vhost does when it replaces a ring (memory table
// replaced, ring restarted): Flush the RX queue on the old ring so held
// buffers go back, Complete the TX queue, then Reset onto the new ring. The
// counters carry on, and a queue broken on the old ring works on the new.
func TestRebind(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.String(), func(t *testing.T) {
			rng := rand.New(rand.NewSource(11))
			old := newGuest(t, k, 64, 0)
			q := NewRxQueue(old.ring, QueueConfig{Features: featV1 | featMrg, MaxFrame: MaxFrameLen(9000)})
			for i := 0; i < 3; i++ {
				old.post(2048)
			}
			old.post(100)
			old.post(4096)
			old.post(2048)
			old.post(2048)
			// Not knowing the buffer size yet, the queue pops one
			// buffer per frame; the big frame straddles into a full
			// burst, and what it leaves is held.
			if n, err := q.Deliver(framesOf(frame(rng, 1000), frame(rng, 5000))); n != 2 || err != nil {
				t.Fatalf("Deliver = %d, %v", n, err)
			}
			held := q.Held()
			if held == 0 {
				t.Fatal("nothing held: the test does not exercise Flush")
			}
			if err := q.Flush(); err != nil {
				t.Fatal(err)
			}
			if old.ring.InFlight() != 0 {
				t.Fatalf("old ring has %d in flight after Flush", old.ring.InFlight())
			}

			// Break the queue on the old ring, then move it to a new one.
			old.add([]buf{{Addr: 0x10, Len: 2048, Write: true}})
			if _, err := q.Deliver(framesOf(frame(rng, 60))); err == nil {
				t.Fatal("bad buffer did not break the queue")
			}
			nw := newGuest(t, k, 64, 0)
			q.Reset(nw.ring)
			if q.Err() != nil || q.Ring() != nw.ring {
				t.Fatal("Reset did not rebind")
			}
			nw.post(2048)
			fr := frame(rng, 1500)
			if n, err := q.Deliver(framesOf(fr)); n != 1 || err != nil {
				t.Fatalf("Deliver on the new ring = %d, %v", n, err)
			}
			checkReceived(t, nw, true, [][]byte{fr})
			checkStats(t, q.Snapshot(), 3, 7500, map[DropReason]int{DropRingBroken: 1})

			q.Reset(nil)
			if n, err := q.Deliver(framesOf(fr)); n != 0 || err != nil {
				t.Fatalf("Deliver on a stopped queue = %d, %v", n, err)
			}
			if q.Snapshot().Drops[DropQueueStopped] != 1 {
				t.Fatal("stopped queue did not count")
			}

			// TX: Complete on the old ring, Reset onto the new one.
			ta, tb := newGuest(t, k, 64, 0), newGuest(t, k, 64, 0)
			tq := NewTxQueue(ta.ring, QueueConfig{Index: 1, Features: featV1})
			ta.send(frame(rng, 100), HeaderLen, hdrCombined)
			if n, err := tq.Receive(32); n != 1 || err != nil {
				t.Fatalf("Receive = %d, %v", n, err)
			}
			if err := tq.Complete(); err != nil || ta.ring.InFlight() != 0 {
				t.Fatalf("Complete: %v", err)
			}
			tq.Reset(tb.ring)
			tb.send(frame(rng, 200), HeaderLen, hdrOwnDesc)
			if n, err := tq.Receive(32); n != 1 || err != nil || tq.Frames().FrameLen(0) != 200 {
				t.Fatalf("Receive on the new ring = %d, %v", n, err)
			}
			if s := tq.Snapshot(); s.Packets != 2 || s.Bytes != 300 {
				t.Fatalf("TX stats %+v", s)
			}
		})
	}
}
