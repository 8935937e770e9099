package xsk

import (
	"testing"

	"golang.org/x/sys/unix"
)

// fakeLayout is a ring layout like the kernel's: words on separate cache
// lines, slots after them.
var fakeLayout = unix.XDPRingOffset{Producer: 0, Consumer: 64, Flags: 128, Desc: 192}

// mapFake maps anonymous memory for a fake ring (page-aligned, like the
// kernel's mapping; no privileges needed).
func mapFake(t testing.TB, slots uint32, slotSize uint64) []byte {
	t.Helper()
	n := ringMapLen(fakeLayout, slots, slotSize)
	mem, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Munmap(mem) })
	return mem
}

func TestRingRejectsBadLayout(t *testing.T) {
	mem := mapFake(t, 8, 8)
	if _, err := newAddrRing(mem, fakeLayout, 6); err == nil {
		t.Fatal("size 6 accepted")
	}
	if _, err := newAddrRing(mem, fakeLayout, 1024); err == nil {
		t.Fatal("slots beyond the mapping accepted")
	}
	bad := fakeLayout
	bad.Consumer = uint64(len(mem))
	if _, err := newAddrRing(mem, bad, 8); err == nil {
		t.Fatal("consumer word beyond the mapping accepted")
	}
	bad = fakeLayout
	bad.Flags = 3
	if _, err := newDescRing(mem, bad, 4); err == nil {
		t.Fatal("misaligned flags word accepted")
	}
}

// TestProducerRingWrap plays the kernel as consumer of a fill ring whose
// indexes start just below 2^32, so they wrap during the test.
func TestProducerRingWrap(t *testing.T) {
	const size = 8
	mem := mapFake(t, size, 8)
	start := uint32(1<<32 - 5)
	r0, _ := newAddrRing(mem, fakeLayout, size)
	r0.producer.Store(start)
	r0.consumer.Store(start)
	r, err := newAddrRing(mem, fakeLayout, size)
	if err != nil {
		t.Fatal(err)
	}
	next := uint64(100)   // next address we produce
	expect := uint64(100) // next address the "kernel" must see
	kcons := start
	for round := range 20 {
		want := uint32(round%5 + 1)
		idx, got := r.reserve(want)
		inFlight := r.prod - got - kcons
		if wantGot := min(want, size-inFlight); got != wantGot {
			t.Fatalf("round %d: reserve(%d) got %d, want %d (in flight %d)", round, want, got, wantGot, inFlight)
		}
		for i := range got {
			r.set(idx+i, next)
			next++
		}
		if round%3 == 2 && got > 0 { // exercise cancel: give back the last one
			r.cancel(1)
			next--
		}
		r.submit()
		// Kernel: consume every other round, whatever was published.
		if round%2 == 1 {
			p := r.producer.Load()
			for ; kcons != p; kcons++ {
				if v := r.slots[kcons&(size-1)]; v != expect {
					t.Fatalf("round %d: kernel read %d at %d, want %d", round, v, kcons, expect)
				}
				expect++
			}
			r.consumer.Store(kcons)
		}
	}
	if r.prod > start { // it must have wrapped past 2^32
		t.Fatalf("indexes did not wrap: prod %d start %d", r.prod, start)
	}
}

func TestProducerRingLimit(t *testing.T) {
	mem := mapFake(t, 4, 8)
	r, _ := newAddrRing(mem, fakeLayout, 4)
	if _, got := r.reserve(10); got != 4 {
		t.Fatalf("reserve(10) on empty 4-ring got %d", got)
	}
	r.submit()
	if _, got := r.reserve(1); got != 0 {
		t.Fatalf("reserve on full ring got %d", got)
	}
	r.consumer.Store(r.consumer.Load() + 3) // kernel consumed 3
	if _, got := r.reserve(5); got != 3 {
		t.Fatalf("after consuming 3, reserve(5) got %d", got)
	}
	r.cancel(10) // only the 3 unsubmitted ones can be cancelled
	if r.prod != r.published {
		t.Fatalf("cancel left prod %d published %d", r.prod, r.published)
	}
	if p := r.pending(); p != 1 {
		t.Fatalf("pending %d, want 1", p)
	}
}

// TestConsumerRingWrap plays the kernel as producer of an RX ring.
func TestConsumerRingWrap(t *testing.T) {
	const size = 8
	mem := mapFake(t, size, descSize)
	start := uint32(1<<32 - 3)
	r, _ := newDescRing(mem, fakeLayout, size)
	r.producer.Store(start)
	r.consumer.Store(start)
	r, _ = newDescRing(mem, fakeLayout, size)
	kprod := start
	seq := uint64(0)
	expect := uint64(0)
	for round := range 30 {
		// Kernel: produce up to 5 while there is room.
		free := size - (kprod - r.consumer.Load())
		for range min(free, uint32(round%6)) {
			r.slots[kprod&(size-1)] = unix.XDPDesc{Addr: seq, Len: uint32(seq%1500) + 60}
			seq++
			kprod++
		}
		r.producer.Store(kprod)
		idx, got := r.peek(uint32(round%4 + 1))
		for i := range got {
			d := r.slot(idx + i)
			if d.Addr != expect || d.Len != uint32(expect%1500)+60 {
				t.Fatalf("round %d: read %+v, want addr %d", round, *d, expect)
			}
			expect++
		}
		r.release()
		if r.consumer.Load() != r.cons {
			t.Fatal("release did not publish")
		}
	}
	if expect == 0 || r.cons > start {
		t.Fatalf("read %d, cons %d: no wrap", expect, r.cons)
	}
}

// TestConsumerRingClampsBrokenProducer: a producer index more than a ring
// ahead must never make us read beyond the ring.
func TestConsumerRingClampsBrokenProducer(t *testing.T) {
	mem := mapFake(t, 4, descSize)
	r, _ := newDescRing(mem, fakeLayout, 4)
	r.producer.Store(1000)
	if _, got := r.peek(100); got != 4 {
		t.Fatalf("peek got %d, want clamp to 4", got)
	}
}

func TestNeedWakeupFlag(t *testing.T) {
	mem := mapFake(t, 4, 8)
	r, _ := newAddrRing(mem, fakeLayout, 4)
	if r.needWakeup() {
		t.Fatal("flag set on fresh ring")
	}
	r.flags.Store(unix.XDP_RING_NEED_WAKEUP)
	if !r.needWakeup() {
		t.Fatal("flag not seen")
	}
}
