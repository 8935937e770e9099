package virtionet

// DropReason says why a frame did not make it through a queue.
type DropReason uint8

const (
	// DropNoRxBuffers: the guest had no (or not enough) receive buffers
	// posted when the frame came, or had run out of them within the
	// queue's RxBackoff before it (rxbackoff.go).
	DropNoRxBuffers DropReason = iota
	// DropTooLong: the frame is longer than the queue's MaxFrame.
	DropTooLong
	// DropMalformed: a TX chain shorter than the virtio-net header plus an
	// Ethernet header, one with device-writable buffers, or one with a
	// zero-length descriptor (virtq.Chain.Malformed).
	DropMalformed
	// DropGuestBufferTooSmall: without MRG_RXBUF the guest's receive buffer
	// cannot hold the frame; with it, the frame needs more buffers than one
	// burst can gather.
	DropGuestBufferTooSmall
	// DropRingBroken: the ring failed (the guest broke the virtio contract)
	// while the frame was in flight, or the queue was already broken.
	DropRingBroken
	// DropQueueStopped: the queue has no ring (stopped or not started).
	DropQueueStopped
	// DropMemoryFault: touching memory faulted while the frame was being
	// copied into the guest (a front-end truncated the file behind this
	// guest's buffers or behind the frame's source); the worker recovered
	// and broke the guest whose memory it was. It also counts the frames of
	// the same Deliver after the interrupted one.
	DropMemoryFault
	// DropBadCsumOffset: a TX header's NEEDS_CSUM checksum field
	// (csum_start + csum_offset) lies outside the frame.
	DropBadCsumOffset
	// DropBadGSOType: a TX header's gso_type is undefined, or one the
	// guest did not negotiate (TSO without HOST_TSO4/6, UFO, ECN, USO).
	DropBadGSOType
	// DropBadGSOSize: a GSO frame's gso_size is 0 or larger than the frame.
	DropBadGSOSize
	// DropGSOWithoutCsum: a GSO frame without NEEDS_CSUM (virtio 1.1,
	// 5.1.6.2: the driver must ask for the checksum of a GSO frame).
	DropGSOWithoutCsum
	// DropGSOTooLong: a GSO frame longer than MaxGSOFrameLen.
	DropGSOTooLong
	// DropResumeDropped: a chain the guest had queued on its transmit
	// ring when its back-end restarted, which the ring's start completed
	// unsent because the front-end had served the ring meanwhile and
	// dropped the chains after it (packed.Resumed.Dropped,
	// docs/reconnect.md). The back-end that died may have sent some.
	DropResumeDropped

	// NumDropReasons sizes arrays indexed by DropReason.
	NumDropReasons
)

var dropNames = [NumDropReasons]string{
	DropNoRxBuffers:         "no_rx_buffers",
	DropTooLong:             "too_long",
	DropMalformed:           "malformed",
	DropGuestBufferTooSmall: "guest_buffer_too_small",
	DropRingBroken:          "ring_broken",
	DropQueueStopped:        "queue_stopped",
	DropMemoryFault:         "memory_fault",
	DropBadCsumOffset:       "bad_csum_offset",
	DropBadGSOType:          "bad_gso_type",
	DropBadGSOSize:          "bad_gso_size",
	DropGSOWithoutCsum:      "gso_without_csum",
	DropGSOTooLong:          "gso_too_long",
	DropResumeDropped:       "resume_dropped",
}

// String returns the reason's name as stats and logs show it.
func (r DropReason) String() string {
	if r < NumDropReasons {
		return dropNames[r]
	}
	return "unknown"
}
