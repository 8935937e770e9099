package vswitch

import "github.com/xvswitch/xvswitch/virtionet"

// crossConnect is the whole per-frame work of a burst from a
// cross-connected port without port security (no MAC configured): count
// each frame, drop those too short to be one (what the classification
// would call malformed), and pass the rest to the partner as they came.
// Nothing else of a frame decides where it goes, so no frame is read:
// the first load of each is the copy's (or the partner's NIC's), instead
// of a header read here that misses in the cache for nothing (the guest
// or the kernel wrote the frame last, on another CPU). It returns the
// frames that go on.
func crossConnect(fr *virtionet.Frames, n int, rc *Counts) Mask {
	var m Mask
	rc.packets += uint64(n)
	for i := range n {
		ln := fr.FrameLen(i)
		rc.bytes += uint64(ln)
		if ln < ethHeaderLen {
			rc.Drop(DropMalformed)
			continue
		}
		m |= Mask(1) << i
	}
	return m
}
