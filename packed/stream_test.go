package packed_test

import (
	"bytes"
	"fmt"
	"math/rand"
	"testing"

	"github.com/xvswitch/xvswitch/virtq"
	"github.com/xvswitch/xvswitch/virtq/drivertest"
)

// shape bounds the random chains of a stream.
type shape struct {
	maxRead, maxWrite int    // buffers of each kind per chain
	maxLen            uint32 // bytes per buffer
	indirectPct       int    // share of chains made indirect (needs INDIRECT_DESC)
}

type streamCase struct {
	name         string
	size         uint16
	features     uint64
	laps         int // ring laps the used index must make
	shape        shape
	restoreEvery int // save/restore the ring every this many bursts (0: never)
	// crashEvery: every this many bursts the device dies and a new one
	// resumes from a stale base (0: never). A device that uses buffers in
	// the order it popped them (ordered, or IN_ORDER; virtionet's queues
	// do) dies with whatever it has in flight, which the next one pops
	// again; one that uses them out of order dies with nothing in flight,
	// since then no reader of the ring can tell which popped chains were
	// used.
	crashEvery int
	ordered    bool
}

// chainRec is what the driver made available under an id.
type chainRec struct {
	bufs     []drivertest.PackedBuf
	slots    uint16
	read     []byte // bytes the device must read
	writeLen uint32
	written  []byte // bytes the device wrote
	popped   bool
}

// TestStream drives rings of every interesting size through many laps of
// random chains (direct, chained, indirect), completes them out of order
// (or in order with IN_ORDER), and checks every byte both ways, every id,
// every length, and the ring state against the driver's own positions.
func TestStream(t *testing.T) {
	mixed := shape{maxRead: 3, maxWrite: 3, maxLen: 200, indirectPct: 30}
	small := shape{maxRead: 2, maxWrite: 2, maxLen: 64, indirectPct: 30}
	cases := []streamCase{
		{name: "size1", size: 1, features: fIndirect, laps: 300, shape: mixed},
		{name: "size2", size: 2, features: fIndirect, laps: 300, shape: mixed, restoreEvery: 7},
		{name: "size3", size: 3, features: fIndirect | fEventIdx, laps: 200, shape: mixed, restoreEvery: 5},
		{name: "size255", size: 255, features: fIndirect, laps: 100, shape: mixed, restoreEvery: 11},
		{name: "size256", size: 256, features: fIndirect | fEventIdx, laps: 100, shape: mixed},
		{name: "size256-direct-only", size: 256, laps: 20, shape: shape{maxRead: 4, maxWrite: 4, maxLen: 100}},
		{name: "size1024", size: 1024, features: fIndirect, laps: 20, shape: mixed, restoreEvery: 13},
		{name: "size32768", size: 32768, features: fIndirect, laps: 3, shape: small, restoreEvery: 400},
		{name: "inorder-size1", size: 1, features: fIndirect | fInOrder, laps: 200, shape: mixed},
		{name: "inorder-size3", size: 3, features: fIndirect | fInOrder, laps: 200, shape: mixed, restoreEvery: 9},
		{name: "inorder-size255", size: 255, features: fIndirect | fInOrder, laps: 100, shape: mixed},
		{name: "inorder-size1024", size: 1024, features: fInOrder, laps: 20, shape: mixed, restoreEvery: 13},
		{name: "inorder-size32768", size: 32768, features: fIndirect | fInOrder, laps: 2, shape: small},
		{name: "crash-size1", size: 1, features: fIndirect, laps: 100, shape: mixed, crashEvery: 3, ordered: true},
		{name: "crash-size2", size: 2, laps: 100, shape: mixed, crashEvery: 5, ordered: true},
		{name: "crash-size3", size: 3, features: fIndirect | fEventIdx, laps: 100, shape: mixed, crashEvery: 4, ordered: true},
		{name: "crash-size255-direct-only", size: 255, laps: 40, shape: shape{maxRead: 4, maxWrite: 4, maxLen: 100}, crashEvery: 7, ordered: true},
		{name: "crash-size256", size: 256, features: fIndirect | fEventIdx, laps: 40, shape: mixed, crashEvery: 11, ordered: true},
		{name: "crash-size1024", size: 1024, laps: 10, shape: mixed, crashEvery: 13, ordered: true},
		{name: "crash-unordered-size3", size: 3, laps: 100, shape: mixed, crashEvery: 4},
		{name: "crash-unordered-size255", size: 255, features: fIndirect, laps: 40, shape: mixed, crashEvery: 7},
		{name: "crash-inorder-size3", size: 3, features: fIndirect | fInOrder, laps: 100, shape: mixed, crashEvery: 5},
		{name: "crash-inorder-size255", size: 255, features: fInOrder, laps: 40, shape: mixed, crashEvery: 9},
		{name: "crash-inorder-size1024", size: 1024, features: fIndirect | fInOrder, laps: 10, shape: mixed, crashEvery: 17},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			runStream(t, tc, int64(1000+i))
		})
	}
}

func runStream(t *testing.T, tc streamCase, seed int64) {
	rng := rand.New(rand.NewSource(seed))
	sh := tc.shape
	area := uint64(sh.maxRead+sh.maxWrite) * uint64(sh.maxLen)
	e := newEnv(t, tc.size, tc.features, uint64(tc.size)*area+4096)
	// The spec puts a chain's id in its last descriptor only.
	e.d.ScrambleIDs = seed%2 == 0
	inOrder := tc.features&fInOrder != 0
	indirect := tc.features&fIndirect != 0
	recs := make([]*chainRec, tc.size)
	var pending []virtq.Used // popped, not yet pushed, in pop order
	var used []virtq.Used
	var reaped []drivertest.PackedCompletion
	var pushedOrder []virtq.Used // pushed, not yet reaped
	usedSlots := 0
	bursts := 0
	completions := 0

	addChains := func() {
		n := rng.Intn(40)
		for k := 0; k < n; k++ {
			free := e.d.FreeSlots()
			if free == 0 || e.d.InFlight() == int(tc.size) {
				return
			}
			nr, nw := rng.Intn(sh.maxRead+1), rng.Intn(sh.maxWrite+1)
			if nr+nw == 0 {
				nr = 1
			}
			ind := indirect && rng.Intn(100) < sh.indirectPct
			if !ind && nr+nw > free {
				// Not enough slots for this many direct descriptors.
				if nr > free {
					nr = free
				}
				nw = free - nr
				if nr+nw == 0 {
					return
				}
			}
			rec := &chainRec{}
			for j := 0; j < nr+nw; j++ {
				ln := 1 + uint32(rng.Intn(int(sh.maxLen)))
				rec.bufs = append(rec.bufs, drivertest.PackedBuf{Len: ln, Write: j >= nr})
			}
			id, err := addWithArea(e, rec, ind, area)
			if err != nil {
				t.Fatalf("add: %v", err)
			}
			if recs[id] != nil {
				t.Fatalf("driver reused id %d still recorded", id)
			}
			recs[id] = rec
		}
	}

	checkReap := func() {
		var err error
		reaped, err = e.d.Reap(reaped[:0])
		if err != nil {
			t.Fatalf("reap: %v", err)
		}
		if len(reaped) != len(pushedOrder) {
			t.Fatalf("reaped %d buffers, pushed %d", len(reaped), len(pushedOrder))
		}
		for k, c := range reaped {
			u := pushedOrder[k]
			if c.ID != u.ID || c.Len != u.Len || c.Slots != u.Descs {
				t.Fatalf("completion %d: got id %d len %d slots %d, pushed id %d len %d slots %d", k, c.ID, c.Len, c.Slots, u.ID, u.Len, u.Descs)
			}
			rec := recs[c.ID]
			var got []byte
			for _, bf := range rec.bufs {
				if bf.Write {
					got = append(got, e.m.Bytes(bf.Addr, uint64(bf.Len))...)
				}
			}
			if !bytes.Equal(got[:c.Len], rec.written) {
				t.Fatalf("id %d: driver sees %x, device wrote %x", c.ID, got[:c.Len], rec.written)
			}
			recs[c.ID] = nil
			usedSlots += int(c.Slots)
			completions++
		}
		pushedOrder = pushedOrder[:0]
	}

	push := func(all bool) {
		if len(pending) == 0 {
			return
		}
		k := len(pending)
		if !all {
			k = rng.Intn(len(pending) + 1)
		}
		if !inOrder && !tc.ordered {
			rng.Shuffle(len(pending), func(i, j int) { pending[i], pending[j] = pending[j], pending[i] })
		}
		used = append(used[:0], pending[:k]...)
		pending = append(pending[:0], pending[k:]...)
		// Push in one or two calls.
		split := 0
		if len(used) > 1 {
			split = rng.Intn(len(used))
		}
		for _, part := range [][]virtq.Used{used[:split], used[split:]} {
			if err := e.r.Push(part); err != nil {
				t.Fatalf("push: %v", err)
			}
		}
		pushedOrder = append(pushedOrder, used...)
		if len(used) > 0 && !e.r.NeedNotify() {
			t.Fatalf("driver events enabled, %d pushed, no notification", len(used))
		}
		checkReap()
	}

	popBurst := func() {
		n := e.pop(1 + rng.Intn(virtq.MaxBurst))
		for i := 0; i < n; i++ {
			c := e.b.Chains[i]
			rec := recs[c.ID]
			if rec == nil || rec.popped {
				t.Fatalf("popped id %d that is not available", c.ID)
			}
			rec.popped = true
			if c.Descs != rec.slots || c.WriteLen != rec.writeLen || int(c.ReadLen) != len(rec.read) {
				t.Fatalf("id %d: popped descs %d read %d write %d; driver made %d, %d, %d", c.ID, c.Descs, c.ReadLen, c.WriteLen, rec.slots, len(rec.read), rec.writeLen)
			}
			if got := concat(e.b.Readable(i)); !bytes.Equal(got, rec.read) {
				t.Fatalf("id %d: device reads %x, driver wrote %x", c.ID, got, rec.read)
			}
			// Write a random amount, often all of it (which lets IN_ORDER
			// batch).
			wl := c.WriteLen
			if rng.Intn(2) == 0 && wl > 0 {
				wl = uint32(rng.Intn(int(wl) + 1))
			}
			rec.written = make([]byte, wl)
			rng.Read(rec.written)
			rest := rec.written
			var segLen uint32
			for _, s := range e.b.Writable(i) {
				segLen += uint32(len(s))
				rest = rest[copy(s, rest):]
			}
			if segLen != c.WriteLen {
				t.Fatalf("id %d: writable segments total %d, WriteLen %d", c.ID, segLen, c.WriteLen)
			}
			pending = append(pending, virtq.Used{ID: c.ID, Descs: c.Descs, Len: wl})
		}
		if e.r.InFlight() != len(pending) {
			t.Fatalf("ring has %d in flight, test %d", e.r.InFlight(), len(pending))
		}
	}

	e.d.SetDriverEvent(drivertest.PackedEventEnable, 0)
	for usedSlots < tc.laps*int(tc.size) {
		addChains()
		popBurst()
		push(false)
		bursts++
		if tc.restoreEvery > 0 && bursts%tc.restoreEvery == 0 {
			push(true)
			st := e.r.State()
			nu, nuw := e.d.NextUsed()
			if st>>16 != uint32(drivertest.PackedOffWrap(nu, nuw)) {
				t.Fatalf("state %#x: used part differs from the driver's next used %d/%t", st, nu, nuw)
			}
			e.restore()
			if e.r.State() != st {
				t.Fatalf("restored state %#x, saved %#x", e.r.State(), st)
			}
		}
		if tc.crashEvery > 0 && bursts%tc.crashEvery == 0 {
			if !inOrder && !tc.ordered {
				push(true)
			}
			// What the dead device popped and never pushed is available
			// again to the next one.
			for _, u := range pending {
				recs[u.ID].popped, recs[u.ID].written = false, nil
			}
			pending = pending[:0]
			e.resumeAfterCrash(rng)
		}
		if bursts > 100*tc.laps*int(tc.size)+1000 {
			t.Fatalf("no progress: %d slots used after %d bursts", usedSlots, bursts)
		}
	}
	// Drain: pop everything left, complete it all.
	for e.d.InFlight() > 0 {
		popBurst()
		push(true)
	}
	na, naw := e.d.NextAvail()
	nu, nuw := e.d.NextUsed()
	if want := state(na, naw, nu, nuw); e.r.State() != want {
		t.Fatalf("drained ring state %#x, driver positions say %#x", e.r.State(), want)
	}
	if e.r.InFlight() != 0 || e.d.FreeSlots() != int(tc.size) {
		t.Fatalf("drained: ring in flight %d, driver free slots %d of %d", e.r.InFlight(), e.d.FreeSlots(), tc.size)
	}
	if usedSlots < tc.laps*int(tc.size) {
		t.Fatalf("only %d slots used", usedSlots)
	}
	// Out of order, every buffer gets a used descriptor; in order, runs
	// of completely written buffers share one.
	if !inOrder && e.d.UsedDescs != completions {
		t.Fatalf("%d used descriptors for %d buffers", e.d.UsedDescs, completions)
	}
	if inOrder && tc.size > 1 && e.d.UsedDescs >= completions {
		t.Fatalf("in order: %d used descriptors for %d buffers: nothing batched", e.d.UsedDescs, completions)
	}
	t.Logf("%d bursts, %d buffers in %d used descriptors, %d slots used (%.1f laps)", bursts, completions, e.d.UsedDescs, usedSlots, float64(usedSlots)/float64(tc.size))
}

// addWithArea gives rec's buffers addresses in the buffer area of the id the
// driver is about to allocate, fills the readable ones with random bytes
// and makes the chain available.
func addWithArea(e *env, rec *chainRec, indirect bool, area uint64) (uint16, error) {
	id, ok := e.d.PeekID()
	if !ok {
		return 0, fmt.Errorf("no free id")
	}
	a := e.bufBase + uint64(id)*area
	for j := range rec.bufs {
		bf := &rec.bufs[j]
		bf.Addr = a
		a += uint64(bf.Len)
		b := e.m.Bytes(bf.Addr, uint64(bf.Len))
		if bf.Write {
			rec.writeLen += bf.Len
			clear(b)
		} else {
			for k := range b {
				b[k] = byte(rand.Int())
			}
			rec.read = append(rec.read, b...)
		}
	}
	var got uint16
	var err error
	if indirect {
		rec.slots = 1
		got, err = e.d.AddIndirect(rec.bufs)
	} else {
		rec.slots = uint16(len(rec.bufs))
		got, err = e.d.Add(rec.bufs)
	}
	if err == nil && got != id {
		return 0, fmt.Errorf("driver used id %d, peeked %d", got, id)
	}
	return got, err
}
