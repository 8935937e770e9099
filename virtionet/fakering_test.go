package virtionet

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand"
	"testing"

	"github.com/xvswitch/xvswitch/virtq"
)

// fakeRing is a virtq.Ring over plain Go memory, for what the driver models
// cannot easily produce: chains of any shape (readable parts in RX chains,
// tiny segments), errors injected at a chosen Pop or Push, and a strict
// check that buffers are completed in exactly the order they were popped
// (IN_ORDER), each with no more than its writable bytes.
type fakeRing struct {
	avail    []fakeChain
	inflight []fakeChain
	done     []fakeDone
	nextID   uint16

	pops, pushes      int
	failPop, failPush int // fail the n-th call (1-based); 0 never
	notify            bool
	notifies          int
	err               error
}

type fakeChain struct {
	id          uint16
	read, write [][]byte
}

type fakeDone struct {
	c   fakeChain
	len uint32
}

var errFake = errors.New("fake ring failure")

func (r *fakeRing) add(read, write [][]byte) {
	r.avail = append(r.avail, fakeChain{id: r.nextID, read: read, write: write})
	r.nextID++
}

func (r *fakeRing) Pop(b *virtq.Burst, max int) (int, error) {
	b.Reset()
	if r.err != nil {
		return 0, virtq.ErrBroken
	}
	r.pops++
	if r.pops == r.failPop {
		r.err = fmt.Errorf("%w: %w", virtq.ErrBadAddress, errFake)
		return 0, r.err
	}
	for b.N < max && len(r.avail) > 0 {
		fc := r.avail[0]
		if len(fc.read)+len(fc.write) > b.SegsLeft() {
			break
		}
		c := b.BeginChain()
		c.ID = fc.id
		c.Descs = uint16(len(fc.read) + len(fc.write))
		for _, s := range fc.read {
			b.SegTail()[0] = s
			b.AddSegs(c, 1, uint32(len(s)), false)
		}
		for _, s := range fc.write {
			b.SegTail()[0] = s
			b.AddSegs(c, 1, uint32(len(s)), true)
		}
		b.CommitChain()
		r.avail = r.avail[1:]
		r.inflight = append(r.inflight, fc)
	}
	return b.N, nil
}

func (r *fakeRing) Push(used []virtq.Used) error {
	if r.err != nil {
		return virtq.ErrBroken
	}
	r.pushes++
	if r.pushes == r.failPush {
		r.err = fmt.Errorf("%w: %w", virtq.ErrUsedNotInFlight, errFake)
		return r.err
	}
	for _, u := range used {
		if len(r.inflight) == 0 || r.inflight[0].id != u.ID {
			r.err = fmt.Errorf("used id %d out of order", u.ID)
			return r.err
		}
		fc := r.inflight[0]
		wl := 0
		for _, s := range fc.write {
			wl += len(s)
		}
		if int(u.Len) > wl || int(u.Descs) != len(fc.read)+len(fc.write) {
			r.err = fmt.Errorf("used %+v for a chain of %d writable bytes", u, wl)
			return r.err
		}
		r.inflight = r.inflight[1:]
		r.done = append(r.done, fakeDone{fc, u.Len})
	}
	return nil
}

func (r *fakeRing) NeedNotify() bool {
	if r.notify {
		r.notifies++
	}
	return r.notify
}
func (r *fakeRing) EnableKicks()  {}
func (r *fakeRing) DisableKicks() {}
func (r *fakeRing) InFlight() int { return len(r.inflight) }
func (r *fakeRing) State() uint32 { return 0 }
func (r *fakeRing) Size() int     { return 256 }

// written returns the first n bytes the device wrote into a done chain.
func (d fakeDone) written() []byte {
	var out []byte
	n := int(d.len)
	for _, s := range d.c.write {
		k := min(n, len(s))
		out = append(out, s[:k]...)
		n -= k
	}
	return out
}

// rxProperty runs random bursts of random frames into random buffers and
// checks what must always hold, whatever the guest posts: every frame is
// delivered or counted; the delivered ones arrive intact, in order, with a
// valid header; buffers complete in pop order within their bounds; after a
// failure the queue reports it and stays broken.
func rxProperty(t *testing.T, seed int64) {
	rng := rand.New(rand.NewSource(seed))
	r := &fakeRing{notify: rng.Intn(2) == 0}
	if rng.Intn(3) == 0 {
		r.failPop = 1 + rng.Intn(20)
	}
	if rng.Intn(3) == 0 {
		r.failPush = 1 + rng.Intn(20)
	}
	mrg := rng.Intn(2) == 0
	feat := uint64(featV1)
	if mrg {
		feat |= featMrg
	}
	maxFrame := 64 + rng.Intn(9000)
	q := NewRxQueue(r, QueueConfig{Features: feat, MaxFrame: maxFrame})
	segLen := func() int {
		if rng.Intn(4) == 0 {
			return rng.Intn(16)
		}
		return 1 + rng.Intn(3000)
	}
	offered, delivered := 0, 0
	var sent [][]byte // frames in the order Deliver got them
	f := &Frames{}
	for round := 0; round < 30; round++ {
		for i := rng.Intn(40); i > 0; i-- {
			var read, write [][]byte
			if rng.Intn(10) == 0 {
				read = append(read, make([]byte, segLen()))
			}
			for j := rng.Intn(4); j >= 0; j-- {
				write = append(write, make([]byte, segLen()))
			}
			r.add(read, write)
		}
		f.Reset()
		for i := rng.Intn(33); i > 0; i-- {
			var segs [][]byte
			for j := rng.Intn(4); j >= 0; j-- {
				s := make([]byte, rng.Intn(1+maxFrame/2))
				rng.Read(s)
				segs = append(segs, s)
			}
			f.Add(segs)
			sent = append(sent, bytes.Join(segs, nil))
		}
		offered += f.Len()
		n, err := q.Deliver(f)
		delivered += n
		if err != nil {
			if !errors.Is(err, virtq.ErrBroken) && !errors.Is(err, errFake) {
				t.Fatalf("seed %d: Deliver error %v is not the ring's", seed, err)
			}
			if q.Err() == nil {
				t.Fatalf("seed %d: error but queue not broken", seed)
			}
		}
		s := q.Snapshot()
		if s.Packets+s.Dropped() != uint64(offered) || s.Packets != uint64(delivered) {
			t.Fatalf("seed %d round %d: offered %d, delivered %d, stats %+v", seed, round, offered, delivered, s)
		}
		if q.Err() == nil && !mrg && q.Held() != 0 {
			t.Fatalf("seed %d: %d buffers held without MRG_RXBUF", seed, q.Held())
		}
	}
	if r.err != nil && q.Err() == nil {
		// The failure was never reached by a call that reports it.
		t.Fatalf("seed %d: ring failed (%v) but the queue did not notice", seed, r.err)
	}
	// Rebuild the frames the guest received from the completed buffers.
	var got [][]byte
	hdrOK := true
	for i := 0; i < len(r.done); {
		d := r.done[i]
		if d.len == 0 {
			i++
			continue
		}
		w := d.written()
		if len(w) < HeaderLen {
			t.Fatalf("seed %d: buffer with %d bytes, no header", seed, len(w))
		}
		h := DecodeHeader(w)
		nb := int(h.NumBuffers)
		if nb < 1 || (!mrg && nb != 1) || i+nb > len(r.done) {
			t.Fatalf("seed %d: num_buffers %d", seed, nb)
		}
		h.NumBuffers = 0
		hdrOK = hdrOK && h == Header{}
		fr := append([]byte(nil), w[HeaderLen:]...)
		for j := 1; j < nb; j++ {
			fr = append(fr, r.done[i+j].written()...)
		}
		got = append(got, fr)
		i += nb
	}
	if !hdrOK {
		t.Fatalf("seed %d: header not zero", seed)
	}
	if len(got) != delivered {
		t.Fatalf("seed %d: guest got %d frames, Deliver reported %d", seed, len(got), delivered)
	}
	j := 0
	for _, fr := range sent {
		if j < len(got) && bytes.Equal(got[j], fr) {
			j++
		}
	}
	if j != len(got) {
		t.Fatalf("seed %d: only %d of %d received frames match the sent ones in order", seed, j, len(got))
	}
	if q.Err() == nil {
		if err := q.Flush(); err != nil {
			t.Fatalf("seed %d: Flush: %v", seed, err)
		}
		if r.err == nil && len(r.inflight) != 0 {
			t.Fatalf("seed %d: %d buffers in flight after Flush", seed, len(r.inflight))
		}
	}
}

func TestRxProperty(t *testing.T) {
	// 100 seeds keep the package fast (also under -race); the fuzz
	// target explores further.
	for seed := int64(0); seed < 100; seed++ {
		rxProperty(t, seed)
	}
}

func FuzzRxProperty(f *testing.F) {
	f.Add(int64(1))
	f.Fuzz(func(t *testing.T, seed int64) { rxProperty(t, seed) })
}

// TestRxPushFailure: when the Push of a burst fails, none of its frames
// count as delivered: all are ring_broken.
func TestRxPushFailure(t *testing.T) {
	r := &fakeRing{failPush: 1}
	for i := 0; i < 40; i++ {
		r.add(nil, [][]byte{make([]byte, 2048)})
	}
	q := NewRxQueue(r, QueueConfig{Features: featV1 | featMrg})
	f := &Frames{}
	for f.AddBytes(make([]byte, 100)) {
	}
	n, err := q.Deliver(f)
	if n != 0 || !errors.Is(err, errFake) {
		t.Fatalf("Deliver = %d, %v", n, err)
	}
	checkStats(t, q.Snapshot(), 0, 0, map[DropReason]int{DropRingBroken: 32})
}

// TestTxFakeShapes: TX chains of odd shapes from the fake ring: the header
// over many tiny segments, exactly a header plus an Ethernet header.
func TestTxFakeShapes(t *testing.T) {
	r := &fakeRing{}
	eth := []byte("ABCDEFGHIJKLMN")
	r.add([][]byte{{0}, {1, 2}, {3, 4, 5}, {6, 7, 8, 9, 10, 11}, eth[:1], eth[1:]}, nil)
	r.add([][]byte{append(make([]byte, HeaderLen), eth...)}, nil)
	r.add([][]byte{make([]byte, HeaderLen), make([]byte, 13)}, nil)
	q := NewTxQueue(r, QueueConfig{Index: 1, Features: featV1})
	if n, err := q.Receive(32); n != 3 || err != nil {
		t.Fatalf("Receive = %d, %v", n, err)
	}
	f := q.Frames()
	if f.Len() != 2 || !bytes.Equal(gather(f, 0), eth) || !bytes.Equal(gather(f, 1), eth) {
		t.Fatalf("frames wrong: %d", f.Len())
	}
	var mac [6]byte
	if f.Peek(0, mac[:]) != 6 || string(mac[:]) != "ABCDEF" {
		t.Fatalf("Peek across segments: %q", mac)
	}
	if err := q.Complete(); err != nil || len(r.done) != 3 {
		t.Fatalf("Complete: %v, %d done", err, len(r.done))
	}
	checkStats(t, q.Snapshot(), 2, 28, map[DropReason]int{DropMalformed: 1})
}

// txProperty: TX chains of random shapes come out as exactly the bytes
// after the header, or are counted under the right reason; every chain is
// completed.
func txProperty(t *testing.T, seed int64) {
	rng := rand.New(rand.NewSource(seed))
	r := &fakeRing{}
	maxFrame := 14 + rng.Intn(3000)
	q := NewTxQueue(r, QueueConfig{Index: 1, Features: featV1, MaxFrame: maxFrame})
	type expect struct {
		frame []byte
		why   DropReason
		ok    bool
	}
	var want []expect
	for i := rng.Intn(100); i > 0; i-- {
		var read, write [][]byte
		var all []byte
		for j := rng.Intn(5); j >= 0; j-- {
			s := make([]byte, rng.Intn(20)+rng.Intn(2)*rng.Intn(3000))
			rng.Read(s)
			read = append(read, s)
			all = append(all, s...)
		}
		if rng.Intn(10) == 0 {
			write = append(write, make([]byte, 1+rng.Intn(100)))
		}
		r.add(read, write)
		e := expect{ok: true}
		switch {
		case len(write) > 0 || len(all) < HeaderLen+EthHeaderLen:
			e = expect{why: DropMalformed}
		case len(all)-HeaderLen > maxFrame:
			e = expect{why: DropTooLong}
		default:
			e.frame = all[HeaderLen:]
		}
		want = append(want, e)
	}
	var drops [NumDropReasons]uint64
	popped := 0
	for {
		n, err := q.Receive(1 + rng.Intn(32))
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		if n == 0 {
			break
		}
		f := q.Frames()
		k := 0
		for _, e := range want[popped : popped+n] {
			if !e.ok {
				drops[e.why]++
				continue
			}
			if k >= f.Len() || !bytes.Equal(gather(f, k), e.frame) || f.FrameLen(k) != len(e.frame) {
				t.Fatalf("seed %d: frame %d wrong", seed, k)
			}
			k++
		}
		if k != f.Len() {
			t.Fatalf("seed %d: %d frames, want %d", seed, f.Len(), k)
		}
		popped += n
		if rng.Intn(2) == 0 {
			if err := q.Complete(); err != nil {
				t.Fatalf("seed %d: %v", seed, err)
			}
		}
	}
	if err := q.Complete(); err != nil {
		t.Fatalf("seed %d: %v", seed, err)
	}
	if popped != len(want) || len(r.done) != len(want) || r.err != nil {
		t.Fatalf("seed %d: popped %d, completed %d of %d (%v)", seed, popped, len(r.done), len(want), r.err)
	}
	if s := q.Snapshot(); s.Drops != drops || s.Packets+s.Dropped() != uint64(len(want)) {
		t.Fatalf("seed %d: stats %+v, drops want %v", seed, s, drops)
	}
}

func TestTxProperty(t *testing.T) {
	for seed := int64(0); seed < 200; seed++ {
		txProperty(t, seed)
	}
}

func FuzzTxProperty(f *testing.F) {
	f.Add(int64(1))
	f.Fuzz(func(t *testing.T, seed int64) { txProperty(t, seed) })
}
