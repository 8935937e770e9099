package virtq

// MaxBurst is the most chains one Pop returns.
const MaxBurst = 32

// MaxBurstSegs bounds the translated segments of one burst. A chain needs a
// segment per descriptor, plus one for every guest region its buffers cross.
// Linux guests use up to MAX_SKB_FRAGS+2 (19) descriptors per chain.
const MaxBurstSegs = 1024

// MaxChainDescs bounds the descriptors of one chain, direct and indirect
// together. Longer chains are hostile (or broken) and fail the ring.
const MaxChainDescs = 1024

// Chain is one descriptor chain the driver made available, as a view into
// the Burst that holds its segments.
type Chain struct {
	// ID is what completes the chain: the buffer id (packed) or the head
	// descriptor index (split).
	ID uint16
	// Descs is how many ring slots the chain occupies (an indirect
	// descriptor counts as one). The packed ring needs it to complete.
	Descs uint16
	// ReadLen and WriteLen are the byte totals of its readable
	// (driver -> device) and writable (device -> driver) buffers.
	ReadLen, WriteLen uint32
	// Malformed means a descriptor of the chain has length 0. The spec
	// leaves such a buffer undefined; Linux's vhost and DPDK's back-end
	// take it as empty. It breaks nothing about the ring, so the chain is
	// popped whole (ID, Descs) but with no segments and no bytes: the
	// device drops it (counted as malformed) and gives it back as used
	// with length 0, like any other.
	Malformed bool

	segStart, nRead, nWrite uint16
}

// Burst holds up to MaxBurst chains popped from a ring, with their buffers
// translated to host bytes. A worker owns one Burst per queue and reuses it:
// Pop resets it, so nothing is allocated per frame. The host slices point
// into guest memory and are valid until the memory table is replaced.
type Burst struct {
	Chains [MaxBurst]Chain
	N      int

	segs  [MaxBurstSegs][]byte
	nsegs int
}

// Reset empties the burst.
func (b *Burst) Reset() {
	b.N = 0
	b.nsegs = 0
}

// Readable returns the readable segments of chain i, in chain order.
func (b *Burst) Readable(i int) [][]byte {
	c := &b.Chains[i]
	s := int(c.segStart)
	return b.segs[s : s+int(c.nRead)]
}

// Writable returns the writable segments of chain i, in chain order.
func (b *Burst) Writable(i int) [][]byte {
	c := &b.Chains[i]
	s := int(c.segStart) + int(c.nRead)
	return b.segs[s : s+int(c.nWrite)]
}

// WritableOne returns the one segment of chain i when the chain is exactly
// one writable segment (a receive buffer of one descriptor in one region,
// what fast paths handle), else nil.
func (b *Burst) WritableOne(i int) []byte {
	c := &b.Chains[i]
	if c.nWrite != 1 || c.nRead != 0 {
		return nil
	}
	return b.segs[c.segStart]
}

// ReadableOne returns the one segment of chain i when the chain is exactly
// one readable segment (a transmit buffer of one descriptor in one region,
// what fast paths handle), else nil.
func (b *Burst) ReadableOne(i int) []byte {
	c := &b.Chains[i]
	if c.nRead != 1 || c.nWrite != 0 {
		return nil
	}
	return b.segs[c.segStart]
}

// Chain building, for the ring kinds. A ring calls BeginChain, then
// AddReadable/AddWritable once per descriptor (an error means the chain did
// not fit; the ring then calls AbortChain and stops the burst there, so the
// chain is popped again next burst, unless it is the burst's first chain, in
// which case it can never fit and the ring fails with ErrChainTooLong), then
// CommitChain.

// SegsLeft is how many segments the burst still has room for.
func (b *Burst) SegsLeft() int { return MaxBurstSegs - b.nsegs }

// Full reports whether the burst has no room for another chain.
func (b *Burst) Full() bool { return b.N == MaxBurst || b.nsegs == MaxBurstSegs }

// BeginChain starts chain b.N.
func (b *Burst) BeginChain() *Chain {
	c := &b.Chains[b.N]
	*c = Chain{segStart: uint16(b.nsegs)}
	return c
}

// SegTail returns the unused segment array, for guestmem.AppendSegments to
// fill without allocating: pass tail[:0] and hand the result's length to
// AddSegs.
func (b *Burst) SegTail() [][]byte { return b.segs[b.nsegs:] }

// AddSegs records n segments just written at SegTail as readable or
// writable bytes of the current chain, totalling length bytes.
// The ring kinds enforce that readable descriptors come first.
func (b *Burst) AddSegs(c *Chain, n int, length uint32, writable bool) {
	b.nsegs += n
	if writable {
		c.nWrite += uint16(n)
		c.WriteLen += length
	} else {
		c.nRead += uint16(n)
		c.ReadLen += length
	}
}

// AddSingle appends a whole chain of one descriptor whose buffer is seg,
// for a ring's fast path: it is BeginChain, AddSegs and CommitChain in one
// step, with no per-descriptor bookkeeping. The caller checked the id and
// that the burst has room (Full is false); an index beyond the arrays
// panics as any bounds check would.
func (b *Burst) AddSingle(id uint16, seg []byte, write bool) {
	s := b.nsegs
	b.segs[s] = seg
	// Field by field, not a Chain literal: the compiler builds a literal
	// in a temporary with narrow stores and copies it with 16-byte loads,
	// which cannot be forwarded from them (a stall per chain, measured in
	// perf annotate of the packed group pop).
	c, n := &b.Chains[b.N], uint32(len(seg))
	c.ID, c.Descs, c.Malformed, c.segStart = id, 1, false, uint16(s)
	c.ReadLen, c.WriteLen, c.nRead, c.nWrite = n, 0, 1, 0
	if write {
		c.ReadLen, c.WriteLen, c.nRead, c.nWrite = 0, n, 0, 1
	}
	b.N++
	b.nsegs = s + 1
}

// MarkMalformed empties the current chain of its segments and bytes and
// marks it Malformed; the ring still walks the rest of it (its descriptors,
// its id) and commits it.
func (b *Burst) MarkMalformed(c *Chain) {
	b.nsegs = int(c.segStart)
	c.ReadLen, c.WriteLen, c.nRead, c.nWrite = 0, 0, 0, 0
	c.Malformed = true
}

// AbortChain drops the current chain's segments.
func (b *Burst) AbortChain(c *Chain) { b.nsegs = int(c.segStart) }

// CommitChain makes the current chain part of the burst.
func (b *Burst) CommitChain() { b.N++ }

// Used completes a chain: the driver gets its buffer back with Len bytes
// written into its writable part.
type Used struct {
	ID    uint16
	Descs uint16 // copied from Chain.Descs
	Len   uint32
}
