package ctl

// QueueCounters is one queue's row of `xvswitch show stats --json`.
type QueueCounters struct {
	Queue     int               `json:"queue"`
	RxPackets uint64            `json:"rx_packets"`
	TxPackets uint64            `json:"tx_packets"`
	RxBytes   uint64            `json:"rx_bytes"`
	TxBytes   uint64            `json:"tx_bytes"`
	Drops     map[string]uint64 `json:"drops"` // by reason; reasons with no drops are left out
	Bursts
	// FloodCopies counts the extra copies flooding made: a frame received
	// once and flooded to k ports adds k-1. With it, across the switch,
	// received + flood copies = transmitted + dropped.
	FloodCopies uint64 `json:"flood_copies"`
	// SegmentCopies counts the extra frames an egress queue made by
	// segmenting TSO frames in software: a frame made into k segments
	// adds k-1. Across the switch, received + flood copies + segment
	// copies = transmitted + dropped.
	SegmentCopies uint64 `json:"segment_copies"`
	PathCounters
}

// Bursts count the bursts that received (transmitted) at least one
// frame. Packets / bursts is the average burst: near 32 (the switch's
// largest) the switch sets the pace of the queue, well below it the
// other side does (it had fewer frames, or fewer buffers, ready).
type Bursts struct {
	RxBursts uint64 `json:"rx_bursts"`
	TxBursts uint64 `json:"tx_bursts"`
}

// PerBurst is packets / bursts, 0 when there was no burst.
func PerBurst(packets, bursts uint64) float64 {
	if bursts == 0 {
		return 0
	}
	return float64(packets) / float64(bursts)
}

// PathCounters say which path a queue's frames took between the guest's
// memory and the NIC (docs/zerocopy.md), counted where the copy would be
// made, at the queue that transmits: CopiedFrames and CopiedBytes were
// copied by the switch, ZerocopyFrames were not (the guest's buffer was
// the NIC's). Not to be confused with the AF_XDP bind mode (show ports,
// af_xdp=copy|zerocopy), which says whether the kernel copies.
// StreamedFrames, of the copied, were written into a guest's buffers with
// streaming stores, where its receive ring measured that cheaper
// (docs/ring-fast-path.md, docs/metrics.md).
type PathCounters struct {
	ZerocopyFrames uint64 `json:"zerocopy_frames"`
	CopiedFrames   uint64 `json:"copied_frames"`
	CopiedBytes    uint64 `json:"copied_bytes"`
	StreamedFrames uint64 `json:"streamed_frames"`
}

func (p *PathCounters) add(o PathCounters) {
	p.ZerocopyFrames += o.ZerocopyFrames
	p.CopiedFrames += o.CopiedFrames
	p.CopiedBytes += o.CopiedBytes
	p.StreamedFrames += o.StreamedFrames
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
	Bursts
	// FloodCopies: see QueueCounters.
	FloodCopies uint64 `json:"flood_copies"`
	// SegmentCopies: see QueueCounters.
	SegmentCopies uint64          `json:"segment_copies"`
	Queues        []QueueCounters `json:"queues"`
	PathCounters
	// LearnRefused counts source MACs the port's frames were not learned
	// for, because the port held its limit of learned MACs (maxmacs=).
	// The frames were still forwarded: it is not a drop.
	LearnRefused uint64 `json:"learn_refused"`
	// Kernel holds what the kernel counted for the port, outside the
	// switch's own ledger: for a NIC, the XDP program's verdicts and the
	// AF_XDP sockets' XDP_STATISTICS (frames the kernel dropped before the
	// switch could receive them, e.g. rx_ring_full).
	Kernel map[string]uint64 `json:"kernel,omitempty"`
}

// SumQueues makes a port's row: its queues and their totals.
func SumQueues(name string, qs []QueueCounters) PortCounters {
	p := PortCounters{Name: name, Drops: map[string]uint64{}, Queues: qs}
	for _, q := range qs {
		p.RxPackets += q.RxPackets
		p.TxPackets += q.TxPackets
		p.RxBytes += q.RxBytes
		p.TxBytes += q.TxBytes
		p.RxBursts += q.RxBursts
		p.TxBursts += q.TxBursts
		p.FloodCopies += q.FloodCopies
		p.SegmentCopies += q.SegmentCopies
		p.PathCounters.add(q.PathCounters)
		for k, v := range q.Drops {
			p.Drops[k] += v
		}
	}
	return p
}
