package vswitch

// Counts is a worker's tally of one burst on one queue, flushed into the
// queue's QueueStats with one atomic add per non-zero field (and one for
// the burst itself when it counted a frame). An ingress queue counts
// frames received (and those it rejected, also as drops), an egress queue
// frames transmitted and dropped.
type Counts struct {
	packets, bytes uint64
	floodCopies    uint64
	// segmentCopies: the extra frames software segmentation made at an
	// egress (segment.go).
	segmentCopies uint64
	drops         [NumDrops]uint32
	anyDrop       bool
	// The path of what an egress queue sent (ctl.PathCounters).
	zerocopy, copied, copiedBytes, streamed uint64
}

// Copied counts frames of bytes in all that the switch copied to send
// them (into a guest's RX buffers, into a UMEM frame).
func (c *Counts) Copied(frames, bytes uint64) {
	c.copied += frames
	c.copiedBytes += bytes
}

// Streamed counts, of the frames copied, those written with streaming
// stores (a guest's receive ring that measured them cheaper).
func (c *Counts) Streamed(frames uint64) { c.streamed += frames }

// Zerocopy counts frames sent without a copy by the switch.
func (c *Counts) Zerocopy(frames uint64) { c.zerocopy += frames }

// Frame counts one frame of n bytes.
func (c *Counts) Frame(n int) {
	c.packets++
	c.bytes += uint64(n)
}

// Frames counts packets frames of bytes in all.
func (c *Counts) Frames(packets, bytes uint64) {
	c.packets += packets
	c.bytes += bytes
}

// Drop counts one frame dropped for d.
func (c *Counts) Drop(d Drop) {
	c.drops[d]++
	c.anyDrop = true
}

// DropN counts n frames dropped for d.
func (c *Counts) DropN(d Drop, n int) {
	if n > 0 {
		c.drops[d] += uint32(n)
		c.anyDrop = true
	}
}

func (c *Counts) flushIngress(q *QueueStats) {
	if c.packets > 0 {
		q.RxPackets.Add(c.packets)
		q.RxBytes.Add(c.bytes)
		q.RxBursts.Add(1)
	}
	if c.floodCopies > 0 {
		q.FloodCopies.Add(c.floodCopies)
		c.floodCopies = 0
	}
	c.flushDrops(q)
	c.packets, c.bytes = 0, 0
}

func (c *Counts) flushEgress(q *QueueStats) {
	if c.packets > 0 {
		q.TxPackets.Add(c.packets)
		q.TxBytes.Add(c.bytes)
		q.TxBursts.Add(1)
	}
	if c.copied > 0 {
		q.CopiedFrames.Add(c.copied)
		q.CopiedBytes.Add(c.copiedBytes)
		c.copied, c.copiedBytes = 0, 0
	}
	if c.streamed > 0 {
		q.StreamedFrames.Add(c.streamed)
		c.streamed = 0
	}
	if c.zerocopy > 0 {
		q.ZerocopyFrames.Add(c.zerocopy)
		c.zerocopy = 0
	}
	if c.segmentCopies > 0 {
		q.SegmentCopies.Add(c.segmentCopies)
		c.segmentCopies = 0
	}
	c.flushDrops(q)
	c.packets, c.bytes = 0, 0
}

func (c *Counts) flushDrops(q *QueueStats) {
	if !c.anyDrop {
		return
	}
	for d := range c.drops {
		if c.drops[d] > 0 {
			q.Drops[d].Add(uint64(c.drops[d]))
			c.drops[d] = 0
		}
	}
	c.anyDrop = false
}
