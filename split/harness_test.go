package split_test

import (
	"bytes"
	"math/rand"
	"testing"

	"github.com/xvswitch/xvswitch/split"
	"github.com/xvswitch/xvswitch/virtq"
	"github.com/xvswitch/xvswitch/virtq/drivertest"
)

const (
	featEventIdx = 1 << virtq.FeatureEventIdx
	featIndirect = 1 << virtq.FeatureIndirectDesc
	featAll      = featEventIdx | featIndirect | 1<<virtq.FeatureVersion1
)

// newMem maps fake guest memory for a test: region 0 holds rings and
// indirect tables, region 1 data buffers.
func newMem(t testing.TB, sizes ...uint64) *drivertest.Mem {
	t.Helper()
	m, err := drivertest.NewMem(sizes...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	return m
}

// shape is a chain to add: direct buffers, then an indirect tail.
type shape struct {
	direct, tail []int // buffer lengths; negative means writable
}

// want is what the device must see for a chain, and what the driver must
// get back.
type want struct {
	read      []byte                // readable bytes, in chain order
	writeBufs []drivertest.SplitBuf // writable buffers, in chain order
	writeCap  uint32
	descs     uint16
	wrote     uint32 // bytes the device wrote (set at completion)
	popped    bool
}

// harness drives one split ring from both sides and checks that every byte
// and every id makes the round trip: the driver model adds chains with
// random contents, the device pops them and must see exactly those bytes,
// writes a pattern into the writable part and pushes; the driver reaps and
// must find the ids, lengths and bytes it expects.
type harness struct {
	t        testing.TB
	m        *drivertest.Mem
	d        *drivertest.SplitDriver
	r        *split.Ring
	b        *virtq.Burst
	features uint64
	rng      *rand.Rand

	dataRegion int
	slabLen    uint64
	freeSlabs  []uint64
	slabOf     map[uint16]uint64
	want       map[uint16]*want
	popped     []uint16 // popped, not yet pushed

	added, completed, reaped int
}

func newHarness(t testing.TB, m *drivertest.Mem, d *drivertest.SplitDriver, features uint64, slabLen uint64, seed int64) *harness {
	t.Helper()
	r, err := split.New(d.Config(features))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return &harness{t: t, m: m, d: d, r: r, b: new(virtq.Burst), features: features,
		rng: rand.New(rand.NewSource(seed)), dataRegion: 1, slabLen: slabLen,
		slabOf: map[uint16]uint64{}, want: map[uint16]*want{}}
}

func (h *harness) slab() uint64 {
	if n := len(h.freeSlabs); n > 0 {
		s := h.freeSlabs[n-1]
		h.freeSlabs = h.freeSlabs[:n-1]
		return s
	}
	return h.m.Alloc(h.dataRegion, h.slabLen, 64)
}

// add adds a chain of the given shape with random readable bytes, and
// reports false if the driver is out of descriptors.
func (h *harness) add(s shape) bool {
	need := len(s.direct)
	if len(s.tail) > 0 {
		need++
	}
	if need > h.d.FreeDescs() {
		return false
	}
	base := h.slab()
	w := &want{}
	off := uint64(0)
	mk := func(lens []int) []drivertest.SplitBuf {
		var bufs []drivertest.SplitBuf
		for _, l := range lens {
			b := drivertest.SplitBuf{Addr: base + off, Len: uint32(l)}
			if l < 0 {
				b.Len, b.Write = uint32(-l), true
				w.writeBufs = append(w.writeBufs, b)
				w.writeCap += b.Len
				clear(h.m.Bytes(b.Addr, uint64(b.Len)))
			} else {
				p := h.m.Bytes(b.Addr, uint64(b.Len))
				h.rng.Read(p)
				w.read = append(w.read, p...)
			}
			off += uint64(b.Len)
			bufs = append(bufs, b)
		}
		return bufs
	}
	direct, tail := mk(s.direct), mk(s.tail)
	if off > h.slabLen {
		h.t.Fatalf("shape needs %d bytes, slab has %d", off, h.slabLen)
	}
	w.descs = uint16(need)
	head, err := h.d.AddChain(direct, tail)
	if err != nil {
		h.t.Fatal(err)
	}
	if _, dup := h.want[head]; dup {
		h.t.Fatalf("driver reused head %d while outstanding", head)
	}
	h.want[head] = w
	h.slabOf[head] = base
	h.added++
	return true
}

// randShape is a random chain: 1-4 readable then 0-4 writable buffers of
// 1-200 bytes, all direct, all indirect (as Linux does) or a direct prefix
// with an indirect tail, when indirect is allowed.
func (h *harness) randShape(indirect bool) shape {
	nr, nw := h.rng.Intn(4), h.rng.Intn(5)
	if nr+nw == 0 {
		nr = 1
	}
	lens := make([]int, 0, nr+nw)
	for i := 0; i < nr; i++ {
		lens = append(lens, 1+h.rng.Intn(200))
	}
	for i := 0; i < nw; i++ {
		lens = append(lens, -(1 + h.rng.Intn(200)))
	}
	if !indirect {
		return shape{direct: lens}
	}
	switch h.rng.Intn(3) {
	case 0:
		return shape{direct: lens}
	case 1:
		return shape{tail: lens}
	default:
		k := h.rng.Intn(len(lens))
		return shape{direct: lens[:k], tail: lens[k:]}
	}
}

// pop pops one burst and checks every chain against what the driver added.
func (h *harness) pop(max int) int {
	h.t.Helper()
	n, err := h.r.Pop(h.b, max)
	if err != nil {
		h.t.Fatalf("Pop: %v", err)
	}
	if n != h.b.N {
		h.t.Fatalf("Pop returned %d, burst holds %d", n, h.b.N)
	}
	for i := 0; i < n; i++ {
		c := &h.b.Chains[i]
		w, ok := h.want[c.ID]
		if !ok || w.popped {
			h.t.Fatalf("popped id %d that is not available (known %v)", c.ID, ok)
		}
		w.popped = true
		var got []byte
		for _, s := range h.b.Readable(i) {
			got = append(got, s...)
		}
		if !bytes.Equal(got, w.read) || c.ReadLen != uint32(len(w.read)) {
			h.t.Fatalf("id %d: readable %d bytes (ReadLen %d), want %d bytes %x..., got %x...",
				c.ID, len(got), c.ReadLen, len(w.read), head(w.read), head(got))
		}
		wl := 0
		for _, s := range h.b.Writable(i) {
			wl += len(s)
		}
		if uint32(wl) != w.writeCap || c.WriteLen != w.writeCap {
			h.t.Fatalf("id %d: writable %d bytes (WriteLen %d), want %d", c.ID, wl, c.WriteLen, w.writeCap)
		}
		if c.Descs != w.descs {
			h.t.Fatalf("id %d: Descs %d, want %d", c.ID, c.Descs, w.descs)
		}
		// The device fills a random prefix of the writable part now, while
		// the burst's segments are valid.
		if w.writeCap > 0 {
			w.wrote = uint32(h.rng.Intn(int(w.writeCap) + 1))
		}
		left := w.wrote
		k := byte(0)
		for _, s := range h.b.Writable(i) {
			for j := range s {
				if left == 0 {
					break
				}
				s[j] = pattern(c.ID, k)
				k++
				left--
			}
		}
		h.popped = append(h.popped, c.ID)
	}
	return n
}

func pattern(id uint16, k byte) byte { return byte(id)*31 + k + 1 }

func head(b []byte) []byte {
	if len(b) > 8 {
		return b[:8]
	}
	return b
}

// complete pushes up to n popped chains, in random order when shuffle.
func (h *harness) complete(n int, shuffle bool) {
	h.t.Helper()
	if n > len(h.popped) {
		n = len(h.popped)
	}
	if shuffle {
		h.rng.Shuffle(len(h.popped), func(i, j int) { h.popped[i], h.popped[j] = h.popped[j], h.popped[i] })
	}
	used := make([]virtq.Used, n)
	for i, id := range h.popped[:n] {
		used[i] = virtq.Used{ID: id, Len: h.want[id].wrote}
	}
	before := h.r.InFlight()
	if err := h.r.Push(used); err != nil {
		h.t.Fatalf("Push: %v", err)
	}
	if h.r.InFlight() != before-n {
		h.t.Fatalf("InFlight %d after pushing %d of %d", h.r.InFlight(), n, before)
	}
	h.popped = append(h.popped[:0], h.popped[n:]...)
	h.completed += n
}

// reap takes every used entry back and checks its id, length and bytes.
func (h *harness) reap() int {
	h.t.Helper()
	n := 0
	for {
		u, ok, err := h.d.Reap()
		if err != nil {
			h.t.Fatal(err)
		}
		if !ok {
			return n
		}
		w := h.want[u.ID]
		if w == nil || !w.popped {
			h.t.Fatalf("reaped id %d that was not popped", u.ID)
		}
		if u.Len != w.wrote {
			h.t.Fatalf("id %d: used len %d, device wrote %d", u.ID, u.Len, w.wrote)
		}
		var got []byte
		for _, b := range w.writeBufs {
			got = append(got, h.m.Bytes(b.Addr, uint64(b.Len))...)
		}
		for k := uint32(0); k < w.wrote; k++ {
			if got[k] != pattern(u.ID, byte(k)) {
				h.t.Fatalf("id %d: byte %d is %#x, device wrote %#x", u.ID, k, got[k], pattern(u.ID, byte(k)))
			}
		}
		delete(h.want, u.ID)
		h.freeSlabs = append(h.freeSlabs, h.slabOf[u.ID])
		delete(h.slabOf, u.ID)
		h.reaped++
		n++
	}
}

// drain pops, completes and reaps everything outstanding.
func (h *harness) drain() {
	h.t.Helper()
	for h.pop(virtq.MaxBurst) > 0 {
	}
	h.complete(len(h.popped), true)
	h.reap()
	if h.d.Outstanding() != 0 || h.r.InFlight() != 0 {
		h.t.Fatalf("after drain: driver has %d outstanding, device %d in flight", h.d.Outstanding(), h.r.InFlight())
	}
	if h.added != h.reaped {
		h.t.Fatalf("added %d chains, reaped %d", h.added, h.reaped)
	}
}
