package vswitch

import "sync/atomic"

// Drop is why a frame was not transmitted. Every frame a port receives is
// either transmitted (at least once, for a flood) or counted under exactly
// one Drop at ingress; every copy handed to an output port is transmitted
// or counted under one Drop at egress.
type Drop uint8

const (
	DropNoRxBuffers Drop = iota // the guest had no receive buffers posted
	DropBufferSmall             // the guest's buffers were too small for the frame (no MRG_RXBUF)
	DropTxFull                  // the NIC's TX ring or frame pool was full
	DropPortDown                // the output port is not ready (no guest, ring disabled)
	DropTooLong                 // longer than the output port's MTU
	DropMalformed               // shorter than an Ethernet header, or a bad virtio-net header
	DropRingBroken              // the guest broke its ring; the device is marked broken
	DropHairpin                 // the destination is the port the frame came in on
	DropNoDest                  // no other port to send it to (a one-port switch, a dangling cross-connect)
	numDrops
)

var dropNames = [numDrops]string{
	DropNoRxBuffers: "no_rx_buffers",
	DropBufferSmall: "guest_buffer_too_small",
	DropTxFull:      "tx_full",
	DropPortDown:    "port_down",
	DropTooLong:     "too_long",
	DropMalformed:   "malformed",
	DropRingBroken:  "ring_broken",
	DropHairpin:     "hairpin",
	DropNoDest:      "no_destination",
}

func (d Drop) String() string {
	if d < numDrops {
		return dropNames[d]
	}
	return "unknown"
}

// QueueStats counts one queue of a port. The worker that polls (or
// transmits on) the queue adds its burst's totals once per burst, so the
// atomics cost nothing per frame; readers (the control socket) load them
// at any time.
type QueueStats struct {
	RxPackets, RxBytes atomic.Uint64
	TxPackets, TxBytes atomic.Uint64
	Drops              [numDrops]atomic.Uint64
	// FloodCopies counts the extra copies flooding made: a frame received
	// once and flooded to k ports adds k-1. With it, across the switch,
	// received + flood copies = transmitted + dropped.
	FloodCopies atomic.Uint64
}

// QueueCounters is a plain snapshot of QueueStats.
type QueueCounters struct {
	Queue     int               `json:"queue"`
	RxPackets uint64            `json:"rx_packets"`
	TxPackets uint64            `json:"tx_packets"`
	RxBytes   uint64            `json:"rx_bytes"`
	TxBytes   uint64            `json:"tx_bytes"`
	Drops     map[string]uint64 `json:"drops"`
	// FloodCopies: see QueueStats.
	FloodCopies uint64 `json:"flood_copies"`
}

// Snapshot reads the counters.
func (q *QueueStats) Snapshot(queue int) QueueCounters {
	c := QueueCounters{
		Queue:     queue,
		RxPackets: q.RxPackets.Load(), RxBytes: q.RxBytes.Load(),
		TxPackets: q.TxPackets.Load(), TxBytes: q.TxBytes.Load(),
		Drops:       map[string]uint64{},
		FloodCopies: q.FloodCopies.Load(),
	}
	for d := Drop(0); d < numDrops; d++ {
		if n := q.Drops[d].Load(); n > 0 {
			c.Drops[d.String()] = n
		}
	}
	return c
}

// PortCounters is one port's row of `xvswitch show stats --json`: its
// totals, and the same per queue.
type PortCounters struct {
	Name      string            `json:"name"`
	RxPackets uint64            `json:"rx_packets"`
	TxPackets uint64            `json:"tx_packets"`
	RxBytes   uint64            `json:"rx_bytes"`
	TxBytes   uint64            `json:"tx_bytes"`
	Drops     map[string]uint64 `json:"drops"`
	// FloodCopies: see QueueStats.
	FloodCopies uint64          `json:"flood_copies"`
	Queues      []QueueCounters `json:"queues"`
	// Kernel holds what the kernel counted for the port, outside the
	// switch's own ledger: for a NIC, the XDP program's verdicts and the
	// AF_XDP sockets' XDP_STATISTICS (frames the kernel dropped before the
	// switch could receive them, e.g. rx_ring_full).
	Kernel map[string]uint64 `json:"kernel,omitempty"`
}

// SumQueues fills the port totals from its queues.
func SumQueues(name string, qs []QueueCounters) PortCounters {
	p := PortCounters{Name: name, Drops: map[string]uint64{}, Queues: qs}
	for _, q := range qs {
		p.RxPackets += q.RxPackets
		p.TxPackets += q.TxPackets
		p.RxBytes += q.RxBytes
		p.TxBytes += q.TxBytes
		p.FloodCopies += q.FloodCopies
		for k, v := range q.Drops {
			p.Drops[k] += v
		}
	}
	return p
}

// burstCounts is a worker's per-burst tally for one queue, flushed into a
// QueueStats with one atomic add per non-zero field.
type burstCounts struct {
	packets, bytes uint64
	floodCopies    uint64
	drops          [numDrops]uint32
	anyDrop        bool
}

// dropN counts n frames dropped for d.
func (b *burstCounts) dropN(d Drop, n int) {
	if n > 0 {
		b.drops[d] += uint32(n)
		b.anyDrop = true
	}
}

func (b *burstCounts) drop(d Drop) {
	b.drops[d]++
	b.anyDrop = true
}

func (b *burstCounts) flushRx(q *QueueStats) {
	if b.packets > 0 {
		q.RxPackets.Add(b.packets)
		q.RxBytes.Add(b.bytes)
	}
	if b.floodCopies > 0 {
		q.FloodCopies.Add(b.floodCopies)
		b.floodCopies = 0
	}
	b.flushDrops(q)
	b.packets, b.bytes = 0, 0
}

func (b *burstCounts) flushTx(q *QueueStats) {
	if b.packets > 0 {
		q.TxPackets.Add(b.packets)
		q.TxBytes.Add(b.bytes)
	}
	b.flushDrops(q)
	b.packets, b.bytes = 0, 0
}

func (b *burstCounts) flushDrops(q *QueueStats) {
	if !b.anyDrop {
		return
	}
	for d := range b.drops {
		if b.drops[d] > 0 {
			q.Drops[d].Add(uint64(b.drops[d]))
			b.drops[d] = 0
		}
	}
	b.anyDrop = false
}
