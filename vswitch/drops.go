package vswitch

// Drop is why a frame was not transmitted. Every frame a port receives is
// either transmitted (at least once, for a flood) or counted under exactly
// one Drop at ingress; every copy handed to an output port is transmitted
// or counted under one Drop at egress.
type Drop uint8

const (
	DropNoRxBuffers    Drop = iota // the guest had no receive buffers posted
	DropBufferSmall                // the guest's buffers were too small for the frame (no MRG_RXBUF)
	DropTxFull                     // the NIC's TX ring or frame pool was full
	DropPortDown                   // the output port is not ready (no guest, ring disabled)
	DropTooLong                    // longer than the output port's MTU
	DropMalformed                  // shorter than an Ethernet header, or a bad virtio-net header
	DropRingBroken                 // the guest broke its ring; the device is marked broken
	DropHairpin                    // the destination is the port the frame came in on
	DropNoDest                     // no other port to send it to (a one-port switch, a dangling cross-connect)
	DropSpoofed                    // its source MAC is not the one configured for the port it came in on
	DropMemoryFault                // touching guest memory faulted mid-copy (its front-end truncated it); that guest is broken
	DropBadCsumOffset              // a guest's virtio-net header asks for a checksum outside the frame
	DropBadGSOType                 // a guest's GSO type is undefined or not negotiated
	DropBadGSOSize                 // a guest's gso_size is 0 or larger than the frame
	DropGSOWithoutCsum             // a guest's GSO frame does not ask for its checksum (NEEDS_CSUM)
	DropGSOTooLong                 // a guest's GSO frame is longer than 64 KiB plus headers
	DropBadGSOHeaders              // a GSO frame's Ethernet/IP/TCP headers cannot be segmented (see offload.Segment)
	DropVLANTagged                 // a tagged frame arrived on an access port (vlan=N alone)
	DropVLANNotTrunked             // its VLAN is not one the port carries (trunk=)
	DropVLANUntagged               // an untagged frame arrived on a trunk without a native VLAN
	DropResumeDropped              // a guest's queued frame completed unsent when its ring resumed after a restart (docs/reconnect.md)
	NumDrops
)

var dropNames = [NumDrops]string{
	DropNoRxBuffers:    "no_rx_buffers",
	DropBufferSmall:    "guest_buffer_too_small",
	DropTxFull:         "tx_full",
	DropPortDown:       "port_down",
	DropTooLong:        "too_long",
	DropMalformed:      "malformed",
	DropRingBroken:     "ring_broken",
	DropHairpin:        "hairpin",
	DropNoDest:         "no_destination",
	DropSpoofed:        "spoofed_source",
	DropMemoryFault:    "memory_fault",
	DropBadCsumOffset:  "bad_csum_offset",
	DropBadGSOType:     "bad_gso_type",
	DropBadGSOSize:     "bad_gso_size",
	DropGSOWithoutCsum: "gso_without_csum",
	DropGSOTooLong:     "gso_too_long",
	DropBadGSOHeaders:  "bad_gso_headers",
	DropVLANTagged:     "vlan_tagged_on_access",
	DropVLANNotTrunked: "vlan_not_in_trunk",
	DropVLANUntagged:   "vlan_untagged_on_trunk",
	DropResumeDropped:  "resume_dropped",
}

// String is the reason's name in `show stats` and the metrics.
func (d Drop) String() string {
	if d < NumDrops {
		return dropNames[d]
	}
	return "unknown"
}

// DropReasons lists every reason's name, in order (the metrics endpoint
// writes a series for each, zeros included).
func DropReasons() []string {
	out := make([]string, NumDrops)
	for d := Drop(0); d < NumDrops; d++ {
		out[d] = d.String()
	}
	return out
}
