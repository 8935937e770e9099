package packed

import "github.com/xvswitch/xvswitch/guestmem"

// streamMax is the longest frame a Fill copies with streaming stores: two
// cache lines, a short frame.
//
// A guest's driver reads the first line of every frame it receives (DPDK's
// virtio driver its destination address, for its counters; a kernel the
// headers), so when the switch comes round to that buffer again the line
// sits in the guest's cache, and an ordinary store must first take it from
// there; a burst's stores wait on those transfers one after another. A
// streaming store writes a whole line without taking it: the line goes to
// memory, and the guest reads it from there. Measured on an EPYC host with
// the switch and the guests on CPUs far apart (BENCHMARKS.md, "Short frames
// written with streaming stores"), at 64 B: switch -> VM 10.9 -> 17.6 Mpps,
// VM <-> VM cross-connect 7.0 -> 10.2, bridge 6.7 -> 9.7; with the CPUs
// sharing a cache, the loops 7-10% slower. Which of the two the host is in
// the switch cannot see, and it changes (a guest's CPU moves), so each
// ring measures its own copies both ways and streams only while that is
// clearly cheaper (guestmem.StreamChoice: CPUs far apart, an ordinary copy
// of a DPDK guest's 64-byte frame costs ~30-130 ns, a streamed one ~15-30;
// sharing a cache, ~12-25 against ~22-30).
//
// A Linux guest's buffers start a line with the head, the frame 12 bytes
// in: there the head's line goes with the frame's first bytes, and a short
// frame's whole lines with it (virtq.StreamsHead; the first pass leaves
// those heads unwritten), on this ring and on the split ring, and the gain
// is larger, as the ordinary way pays for the head's line twice, a load in
// the first pass and the upgrade to a store in the copy (BENCHMARKS.md, "A
// Linux guest's short frames as whole lines": far, 184-262 ns a frame ->
// 65-97; "A Linux guest's long frames, their first line streamed": 1500
// bytes, medians near 75.6 -> 64.5 (packed), far 207 -> 132).
//
// A DPDK guest's long frames, and a Linux guest's after their first line,
// are copied with ordinary stores: a guest that sends a frame back (a VM
// <-> VM loop, a forwarding VM) has the switch read it again, from its own
// cache after ordinary stores, from memory after streaming ones (VM <-> VM
// at 1518 B, every line streamed: 10.7 -> 3.7 Mpps); a Linux guest's first
// line is the one line the ordinary way takes twice. The split ring's Fill
// does not stream a DPDK guest's frames: there the loops lost 13-17% for
// 7% in switch -> VM, and with the same choice as here too (its copies
// measure as these do; the loops' loss comes after them).
const streamMax = 2 * guestmem.CacheLine

// streams reports whether a Fill copies frame src into dst, the bytes of a
// buffer after its head, with streaming stores while the ring's
// StreamChoice streams: a frame of one or two lines (64 to streamMax
// bytes) that starts a line, as in the buffers of DPDK's virtio driver. A
// buffer that starts a line (a Linux guest's) has its head's line streamed
// with the frame instead (virtq.StreamsHead), and anything else is copied
// ordinarily. When it streams, guestmem.StreamFence must run before the
// buffer is published.
func streams(dst, src []byte) bool {
	return guestmem.StartsLine(dst) && uint(len(src)-guestmem.CacheLine) <= streamMax-guestmem.CacheLine
}
