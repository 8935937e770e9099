package virtionet_test

import (
	"github.com/xvswitch/xvswitch/virtionet"
	"github.com/xvswitch/xvswitch/virtq"
)

// A worker's burst moving frames from guest A to guest B (cross-connect):
// one copy, from A's TX buffers straight into B's RX buffers. An error
// from either queue means that guest broke its ring: mark its device
// broken and stop polling the queue; the counters already say what was
// lost.
func Example_guestToGuest() {
	var ringA, ringB virtq.Ring // from packed.New or split.New, via vhost
	cfg := virtionet.QueueConfig{Features: 1 << virtq.FeatureVersion1, MaxFrame: virtionet.MaxFrameLen(1500)}
	txA := virtionet.NewTxQueue(ringA, cfg) // A's queue 2k+1
	rxB := virtionet.NewRxQueue(ringB, cfg) // B's queue 2k

	n, err := txA.Receive(virtq.MaxBurst)
	if err != nil || n == 0 {
		return // err: A is broken; 0: A's ring is empty
	}
	if _, err := rxB.Deliver(txA.Frames()); err != nil {
		_ = err // B is broken
	}
	if err := txA.Complete(); err != nil {
		_ = err // A is broken
	}
}

// Frames from a NIC's UMEM to a guest: each frame is one segment.
func Example_fromUMEM() {
	var ring virtq.Ring
	rx := virtionet.NewRxQueue(ring, virtionet.QueueConfig{Features: 1<<virtq.FeatureVersion1 | 1<<virtionet.FeatureMrgRxbuf})
	var umemFrames [][]byte // the UMEM frames of an AF_XDP RX burst

	var f virtionet.Frames // owned by the worker, reused every burst
	f.Reset()
	for _, b := range umemFrames {
		f.AddBytes(b)
	}
	delivered, err := rx.Deliver(&f)
	_, _ = delivered, err
	// The UMEM frames can go back to the fill ring now: Deliver copied
	// them. rx.LastBurst() has this burst's drops by reason.
}
