package virtionet

import (
	"bytes"
	"fmt"
	"math/rand"
	"testing"

	"github.com/xvswitch/xvswitch/packed"
	"github.com/xvswitch/xvswitch/split"
	"github.com/xvswitch/xvswitch/virtq"
	"github.com/xvswitch/xvswitch/virtq/drivertest"
)

// The tests play the guest with the driver models of virtq/drivertest on
// real packed and split rings in fake guest memory: region 0 holds the ring,
// region 1 the data buffers.

type ringKind int

const (
	kindPacked ringKind = iota
	kindSplit
)

func (k ringKind) String() string {
	if k == kindPacked {
		return "packed"
	}
	return "split"
}

var kinds = []ringKind{kindPacked, kindSplit}

const (
	featV1  = 1 << virtq.FeatureVersion1
	featMrg = 1 << FeatureMrgRxbuf
)

type buf = drivertest.PackedBuf

type completion struct {
	id uint16
	n  uint32
}

// guest is one virtqueue seen from the driver side.
type guest struct {
	t    testing.TB
	kind ringKind
	m    *drivertest.Mem
	sp   *drivertest.SplitDriver
	pk   *drivertest.PackedDriver
	ring virtq.Ring

	chains map[uint16][]buf // id -> its buffers, while in flight
	free   map[uint32][]uint64

	scratch []drivertest.PackedCompletion // for refill's Reap

	// refill's split fast path: recycling heads behind the model's back.
	fast               bool
	lastUsed, availIdx uint16
}

// newGuest builds a ring of size descriptors; ringFeatures go to the ring
// (EVENT_IDX, IN_ORDER, ...), VERSION_1 always.
func newGuest(t testing.TB, kind ringKind, size uint16, ringFeatures uint64) *guest {
	t.Helper()
	m, err := drivertest.NewMem(1<<20, 64<<20)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	return newGuestOn(t, m, kind, size, ringFeatures)
}

// newGuestOn is newGuest over memory m, whose region 0 holds the ring.
func newGuestOn(t testing.TB, m *drivertest.Mem, kind ringKind, size uint16, ringFeatures uint64) *guest {
	t.Helper()
	g := &guest{t: t, kind: kind, m: m, chains: map[uint16][]buf{}, free: map[uint32][]uint64{}}
	f := ringFeatures | featV1
	switch kind {
	case kindPacked:
		g.pk = drivertest.NewPackedDriver(m, 0, size)
		g.pk.InOrder = virtq.Has(f, virtq.FeatureInOrder)
		g.scratch = make([]drivertest.PackedCompletion, 0, size)
		r, err := packed.New(g.pk.Config(f | 1<<virtq.FeatureRingPacked))
		if err != nil {
			t.Fatal(err)
		}
		g.ring = r
	case kindSplit:
		g.sp = drivertest.NewSplitDriver(m, 0, size)
		r, err := split.New(g.sp.Config(f))
		if err != nil {
			t.Fatal(err)
		}
		g.ring = r
	}
	return g
}

// alloc returns n bytes of data memory, reusing freed buffers of that size.
func (g *guest) alloc(n uint32) uint64 {
	if l := g.free[n]; len(l) > 0 {
		a := l[len(l)-1]
		g.free[n] = l[:len(l)-1]
		return a
	}
	return g.m.Alloc(1, uint64(n), 64)
}

// add makes a chain available and returns its id.
func (g *guest) add(bufs []buf) uint16 {
	g.t.Helper()
	var id uint16
	var err error
	switch g.kind {
	case kindPacked:
		id, err = g.pk.Add(bufs)
	case kindSplit:
		sb := make([]drivertest.SplitBuf, len(bufs))
		for i, b := range bufs {
			sb[i] = drivertest.SplitBuf(b)
		}
		id, err = g.sp.AddChain(sb, nil)
		g.sp.Publish()
	}
	if err != nil {
		g.t.Fatalf("add: %v", err)
	}
	g.chains[id] = bufs
	return id
}

// reap collects what the device completed, in order, and frees the
// buffers for reuse (their bytes stay readable until reused).
func (g *guest) reap() []completion {
	g.t.Helper()
	var out []completion
	switch g.kind {
	case kindPacked:
		cs, err := g.pk.Reap(nil)
		if err != nil {
			g.t.Fatalf("reap: %v", err)
		}
		for _, c := range cs {
			out = append(out, completion{c.ID, c.Len})
		}
	case kindSplit:
		for {
			u, ok, err := g.sp.Reap()
			if err != nil {
				g.t.Fatalf("reap: %v", err)
			}
			if !ok {
				break
			}
			out = append(out, completion{u.ID, u.Len})
		}
	}
	return out
}

// release returns completed chains' buffers to the allocator.
func (g *guest) release(cs []completion) {
	for _, c := range cs {
		for _, b := range g.chains[c.id] {
			g.free[b.Len] = append(g.free[b.Len], b.Addr)
		}
		delete(g.chains, c.id)
	}
}

// interrupts asks the device for interrupts, or not.
func (g *guest) interrupts(on bool) {
	switch g.kind {
	case kindPacked:
		if on {
			g.pk.SetDriverEvent(drivertest.PackedEventEnable, 0)
		} else {
			g.pk.SetDriverEvent(drivertest.PackedEventDisable, 0)
		}
	case kindSplit:
		g.sp.SetNoInterrupt(!on)
	}
}

// Layouts of a TX chain: where the virtio-net header sits.
type txLayout int

const (
	hdrOwnDesc   txLayout = iota // header alone, then the frame
	hdrCombined                  // header and frame in one descriptor
	hdrSplit                     // header split over two descriptors, the second also holding the frame's start
	frameScatter                 // header alone, frame over three descriptors
)

var layouts = []txLayout{hdrOwnDesc, hdrCombined, hdrSplit, frameScatter}

func (l txLayout) String() string {
	return [...]string{"own-desc", "combined", "split-header", "scattered"}[l]
}

// txChain builds the buffers of a TX chain carrying frame (plus a header of
// hdrLen bytes filled with junk the device must ignore).
func (g *guest) txChain(frame []byte, hdrLen int, l txLayout) []buf {
	data := append(bytes.Repeat([]byte{0xee}, hdrLen), frame...)
	var cuts []int
	switch l {
	case hdrOwnDesc:
		cuts = []int{hdrLen}
	case hdrCombined:
	case hdrSplit:
		cuts = []int{5, hdrLen + 3}
	case frameScatter:
		n := len(frame)
		cuts = []int{hdrLen, hdrLen + n/3, hdrLen + 2*n/3}
	}
	var bufs []buf
	prev := 0
	for _, c := range append(cuts, len(data)) {
		if c <= prev || c > len(data) {
			continue
		}
		part := data[prev:c]
		a := g.alloc(uint32(len(part)))
		copy(g.m.Bytes(a, uint64(len(part))), part)
		bufs = append(bufs, buf{Addr: a, Len: uint32(len(part))})
		prev = c
	}
	return bufs
}

// send makes frame available on a TX ring.
func (g *guest) send(frame []byte, hdrLen int, l txLayout) uint16 {
	return g.add(g.txChain(frame, hdrLen, l))
}

// post makes an RX buffer of n bytes available (one writable descriptor),
// or of several descriptors when given more sizes.
func (g *guest) post(sizes ...uint32) uint16 {
	bufs := make([]buf, len(sizes))
	for i, n := range sizes {
		bufs[i] = buf{Addr: g.alloc(n), Len: n, Write: true}
		clear(g.m.Bytes(bufs[i].Addr, uint64(n)))
	}
	return g.add(bufs)
}

// chainBytes is the first n bytes written into chain id.
func (g *guest) chainBytes(id uint16, n uint32) []byte {
	var out []byte
	for _, b := range g.chains[id] {
		if n == 0 {
			break
		}
		k := min(n, b.Len)
		out = append(out, g.m.Bytes(b.Addr, uint64(k))...)
		n -= k
	}
	return out
}

// received parses completed RX buffers into frames: each starts with a
// header; with mrg its num_buffers says how many buffers it spans.
func (g *guest) received(cs []completion, hdrLen int, mrg bool) ([][]byte, error) {
	var frames [][]byte
	for i := 0; i < len(cs); {
		c := cs[i]
		data := g.chainBytes(c.id, c.n)
		if len(data) < hdrLen {
			return frames, fmt.Errorf("buffer %d: %d bytes, no header", c.id, c.n)
		}
		h := DecodeHeader(data[:hdrLen])
		nb := 1
		if hdrLen == HeaderLen {
			nb = int(h.NumBuffers)
		}
		if !mrg && nb != 1 || nb < 1 || i+nb > len(cs) {
			return frames, fmt.Errorf("buffer %d: num_buffers %d (%d completions left)", c.id, nb, len(cs)-i)
		}
		h.NumBuffers = 0
		if h != (Header{}) {
			return frames, fmt.Errorf("buffer %d: header not zero: %+v", c.id, h)
		}
		frame := append([]byte(nil), data[hdrLen:]...)
		for j := 1; j < nb; j++ {
			frame = append(frame, g.chainBytes(cs[i+j].id, cs[i+j].n)...)
		}
		frames = append(frames, frame)
		i += nb
	}
	return frames, nil
}

// frame returns a frame of n bytes with recognizable contents.
func frame(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	rng.Read(b)
	return b
}
