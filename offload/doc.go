// Package offload does in software what a guest left to the device with
// virtio-net's offloads: it completes a partial checksum (NEEDS_CSUM:
// csum_start, csum_offset) and segments a TCP GSO frame (TSO over IPv4 or
// IPv6) into MSS-sized frames with their own IP lengths, IDs, TCP sequence
// numbers, flags and checksums.
//
// It is a leaf: pure functions over byte slices, writing only into
// buffers the caller provides, never allocating, and never trusting the
// frame (it comes from a guest): every offset is checked against the
// slices before use, and a frame it cannot handle is an error, not a
// panic. The switch calls it for an egress that cannot take a frame's
// offload as it is (a NIC through AF_XDP, which has no TSO; a guest that
// did not negotiate GUEST_CSUM or GUEST_TSO).
package offload
