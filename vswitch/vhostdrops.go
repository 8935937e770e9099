package vswitch

import "github.com/xvswitch/xvswitch/virtionet"

// countVirtioDrops adds a virtio-net queue's burst drops (LastBurstDrops;
// nil: none) to c. On the ingress side a dropped frame was also received,
// so it counts as a packet too (received = forwarded + dropped).
func countVirtioDrops(c *Counts, drops *[virtionet.NumDropReasons]uint64, received bool) {
	if drops == nil {
		return
	}
	for r := virtionet.DropReason(0); r < virtionet.NumDropReasons; r++ {
		n := int(drops[r])
		if n == 0 {
			continue
		}
		if received {
			c.packets += uint64(n)
		}
		c.DropN(virtioDrop[r], n)
	}
}

// virtioDrop maps virtionet's drop reasons to the switch's. Each must map
// to a reason of its own (TestVirtioDropsMapDistinctly): a reason left out
// would silently count as DropNoRxBuffers, the zero Drop.
var virtioDrop = [virtionet.NumDropReasons]Drop{
	virtionet.DropNoRxBuffers:         DropNoRxBuffers,
	virtionet.DropTooLong:             DropTooLong,
	virtionet.DropMalformed:           DropMalformed,
	virtionet.DropGuestBufferTooSmall: DropBufferSmall,
	virtionet.DropRingBroken:          DropRingBroken,
	virtionet.DropQueueStopped:        DropPortDown,
	virtionet.DropMemoryFault:         DropMemoryFault,
	virtionet.DropBadCsumOffset:       DropBadCsumOffset,
	virtionet.DropBadGSOType:          DropBadGSOType,
	virtionet.DropBadGSOSize:          DropBadGSOSize,
	virtionet.DropGSOWithoutCsum:      DropGSOWithoutCsum,
	virtionet.DropGSOTooLong:          DropGSOTooLong,
	virtionet.DropResumeDropped:       DropResumeDropped,
}
