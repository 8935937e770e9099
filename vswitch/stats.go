package vswitch

import (
	"sync/atomic"

	"github.com/xvswitch/xvswitch/ctl"
)

// QueueStats counts one queue of a port. The worker that polls (or
// transmits on) the queue adds its burst's totals once per burst, so the
// atomics cost nothing per frame; readers (the control socket) load them
// at any time.
type QueueStats struct {
	RxPackets, RxBytes atomic.Uint64
	TxPackets, TxBytes atomic.Uint64
	// RxBursts and TxBursts count the bursts that received (transmitted)
	// at least one frame: packets / bursts is the average burst, the
	// switch's frames per poll (VPP's vectors per call). Near MaxBurst the
	// switch sets the pace of that queue; well below it, the other side
	// does (the guest or the NIC gives it fewer frames, or fewer buffers,
	// than it could take).
	RxBursts, TxBursts atomic.Uint64
	Drops              [NumDrops]atomic.Uint64
	// FloodCopies counts the extra copies flooding made: a frame received
	// once and flooded to k ports adds k-1. With it, across the switch,
	// received + flood copies = transmitted + dropped.
	FloodCopies atomic.Uint64
	// SegmentCopies counts the extra frames segmenting a TSO frame in
	// software made at this (egress) queue: one copy of a frame made into
	// k segments adds k-1. Across the switch, received + flood copies +
	// segment copies = transmitted + dropped.
	SegmentCopies atomic.Uint64
	// The path the frames this queue transmitted took (ctl.PathCounters):
	// copied by the switch, or not; of the copied, those written with
	// streaming stores.
	ZerocopyFrames, CopiedFrames, CopiedBytes, StreamedFrames atomic.Uint64
}

// snapshot reads the counters as queue number queue's row.
func (q *QueueStats) snapshot(queue int) ctl.QueueCounters {
	c := ctl.QueueCounters{
		Queue:     queue,
		RxPackets: q.RxPackets.Load(), RxBytes: q.RxBytes.Load(),
		TxPackets: q.TxPackets.Load(), TxBytes: q.TxBytes.Load(),
		Bursts:        ctl.Bursts{RxBursts: q.RxBursts.Load(), TxBursts: q.TxBursts.Load()},
		Drops:         map[string]uint64{},
		FloodCopies:   q.FloodCopies.Load(),
		SegmentCopies: q.SegmentCopies.Load(),
		PathCounters: ctl.PathCounters{ZerocopyFrames: q.ZerocopyFrames.Load(),
			CopiedFrames: q.CopiedFrames.Load(), CopiedBytes: q.CopiedBytes.Load(),
			StreamedFrames: q.StreamedFrames.Load()},
	}
	for d := Drop(0); d < NumDrops; d++ {
		if n := q.Drops[d].Load(); n > 0 {
			c.Drops[d.String()] = n
		}
	}
	return c
}
