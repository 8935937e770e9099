package guestmem

import (
	"slices"
	"sync/atomic"
	"time"
)

// StreamChoice decides, by measuring a writer's own bursts, whether the
// frames it may stream (short ones; a Linux guest's first line) go into
// guest memory as streaming stores (CopyStream) or as ordinary ones
// (Copy).
//
// Which pays depends on where the guest's CPU sits, which the switch
// cannot see: with the guest on a CPU far away (another core complex,
// another socket) an ordinary store to a line the guest read last waits
// for that line to come over, and a streaming store, which takes no line,
// is much cheaper (BENCHMARKS.md: switch -> VM 10.9 -> 17.6 Mpps); with
// the two sharing a cache the line comes over cheaply, the copies cost
// about the same, and the streaming store's price shows later, when the
// guest or the switch reads the frame again from memory instead of from
// the shared cache (VM <-> VM loops 7-10% slower). So: stream when the
// streaming copies are clearly cheaper than the ordinary ones, copy
// ordinarily otherwise.
//
// One burst in sampleEvery that carries at least minSampleFrames frames is
// timed, alternately in each way, from before its copies until their
// stores are done; every window of 2*windowSamples such samples the
// medians per frame decide the way for the next window. The other bursts
// go the chosen way and cost one counter increment and a compare. Not safe
// for concurrent use: one per ring, used by the ring's one writer.
type StreamChoice struct {
	bursts  uint32
	stream  bool                     // the way chosen
	way     bool                     // the way of the burst begun: stream, or a sample's
	since   time.Duration            // when a timed burst's copies started (since epoch); 0: none is timed
	samples [2][windowSamples]uint32 // ns per frame, times 16: ordinary, streaming
	taken   [2]int
	fence   uint32 // for record's locked instruction
}

const (
	sampleEvery     = 64 // a power of two
	minSampleFrames = 8
	windowSamples   = 16
)

// NewStreamChoice returns a choice that streams until it has measured,
// where the CPU has streaming stores at all.
func NewStreamChoice() StreamChoice {
	return StreamChoice{stream: haveStreamStores, way: haveStreamStores}
}

// Begin is called before a burst of at most frames frames touches its
// buffers: Streams then says whether to stream them.
func (c *StreamChoice) Begin(frames int) {
	if c.bursts++; haveStreamStores && c.bursts%sampleEvery == 0 {
		c.sample(frames)
	}
}

// Restart is called when the burst's copies start, after the writer's
// pass over its buffers: a timed burst's clock starts again there, so that
// what is timed is the copies, where the two ways differ (the pass reads
// the guest's descriptors, the same either way, and would blur the
// difference).
func (c *StreamChoice) Restart() {
	if c.since != 0 {
		c.since = now()
	}
}

// Streams reports whether the burst begun streams the frames it may.
func (c *StreamChoice) Streams() bool { return c.way }

// sample starts a timed burst, alternately in each way, if it carries
// frames enough to time; a shorter one leaves it to the next. Not inlined,
// so that Begin is.
//
//go:noinline
func (c *StreamChoice) sample(frames int) {
	if frames < minSampleFrames {
		c.bursts--
		return
	}
	c.way = c.bursts/sampleEvery&1 == 1
	c.since = now()
}

// now is the time since epoch, never 0 (0 says a burst is not timed).
//
//go:noinline
func now() time.Duration { return max(time.Since(epoch), 1) }

// epoch is what the samples' monotonic times are read against.
var epoch = time.Now()

// End is called after the burst's copies (and StreamFence, if it
// streamed) with the frames the burst took and whether it streamed any. A
// timed burst that took none is no sample, and neither is one that was to
// stream and had no frame to stream (a DPDK guest's long frames, buffers
// that do not start where a line can be streamed): the way goes back to
// the one chosen, which short frames among long ones then still take. A
// timed burst that a memory fault cut short never reaches End: its way
// then stays, and the next burst is timed in its place.
func (c *StreamChoice) End(frames int, streamed bool) {
	if c.since != 0 {
		c.record(frames, streamed)
	}
}

func (c *StreamChoice) record(frames int, streamed bool) {
	since := c.since
	c.since = 0
	if frames <= 0 || c.way && !streamed {
		c.way = c.stream
		return
	}
	// A locked instruction waits for the burst's ordinary stores to leave
	// the store buffer, so they are counted whole, as the streaming ones
	// are (StreamFence).
	atomic.AddUint32(&c.fence, 1)
	ns := time.Since(epoch) - since
	c.add(c.way, uint32(min(ns*16/time.Duration(frames), 1<<31)))
}

// add records a sample of cost (ns per frame, times 16) taken in the way
// stream, and decides when a window is complete.
func (c *StreamChoice) add(stream bool, cost uint32) {
	way := b2i(stream)
	if c.taken[way] < windowSamples {
		c.samples[way][c.taken[way]] = cost
		c.taken[way]++
	}
	if c.taken[0] == windowSamples && c.taken[1] == windowSamples {
		ordinary, streaming := median(&c.samples[0]), median(&c.samples[1])
		// Stream only when clearly cheaper: at about the same cost the
		// ordinary stores win later (the type's comment).
		c.stream = uint64(streaming)*8 < uint64(ordinary)*7
		streamWindows[b2i(c.stream)].Add(1)
		c.taken = [2]int{}
	}
	c.way = c.stream
}

// Streaming reports the way chosen for now.
func (c *StreamChoice) Streaming() bool { return c.stream }

// StreamWindows reports how many windows of every StreamChoice in the
// process chose ordinary and streaming stores (the metrics' process-wide
// view of the choice).
func StreamWindows() (ordinary, streaming uint64) {
	return streamWindows[0].Load(), streamWindows[1].Load()
}

var streamWindows [2]atomic.Uint64

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func median(s *[windowSamples]uint32) uint32 {
	slices.Sort(s[:])
	return s[windowSamples/2]
}
