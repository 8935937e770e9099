package vhosttest

import (
	"github.com/xvswitch/xvswitch/vhost"
	"github.com/xvswitch/xvswitch/virtq"
)

// DefaultFeatures is the virtio feature word a front-end negotiates unless
// told otherwise: virtio 1, mergeable RX buffers, EVENT_IDX and vhost-user
// protocol features, as QEMU's virtio-net and DPDK's virtio-user ask for.
const DefaultFeatures = uint64(1)<<virtq.FeatureVersion1 | 1<<vhost.NetFeatureMrgRxbuf |
	1<<vhost.FeatureProtocolFeatures | 1<<virtq.FeatureEventIdx

// ProtocolQEMU is the protocol features QEMU's vhost-user-net negotiates
// with a back-end that offers them.
const ProtocolQEMU = uint64(1)<<vhost.ProtoMQ | 1<<vhost.ProtoReplyAck | 1<<vhost.ProtoMTU |
	1<<vhost.ProtoConfigureMemSlots | 1<<vhost.ProtoStatus | 1<<vhost.ProtoRARP

// Options says what Start brings up. The zero value is one queue pair of
// split rings with DefaultFeatures and ProtocolQEMU.
type Options struct {
	// Packed negotiates VIRTIO_F_RING_PACKED; otherwise the rings are
	// split.
	Packed bool
	// QueuePairs is how many RX/TX vring pairs to set up (default 1).
	// More than one negotiates VIRTIO_NET_F_MQ.
	QueuePairs int
	// Features is the virtio feature word to negotiate (default
	// DefaultFeatures); Start adds what Packed and QueuePairs need.
	Features uint64
	// Protocol is the protocol features to negotiate (default
	// ProtocolQEMU).
	Protocol uint64
	// RingSize is every vring's size (default 256).
	RingSize uint16
	// BufSize is the size of each buffer Send and PostRx use (default
	// 2048: a 1514-byte frame and its header).
	BufSize int
	// MmapOffset places every region at this offset of its memfd (the
	// file is sparse before it), as QEMU places the regions of a memory
	// backend after the first; it need not be page aligned. The memory
	// table says so in each region's mmap_offset.
	MmapOffset uint64
}

func (o Options) withDefaults() Options {
	if o.QueuePairs == 0 {
		o.QueuePairs = 1
	}
	if o.Features == 0 {
		o.Features = DefaultFeatures
	}
	if o.Packed {
		o.Features |= 1 << virtq.FeatureRingPacked
	}
	if o.QueuePairs > 1 {
		o.Features |= 1 << vhost.NetFeatureMQ
	}
	if o.Protocol == 0 {
		o.Protocol = ProtocolQEMU
	}
	if o.RingSize == 0 {
		o.RingSize = 256
	}
	if o.BufSize == 0 {
		o.BufSize = defaultBufSize
	}
	return o
}

// Start brings the device up as QEMU does for a virtio-net guest:
// Negotiate, ShareMemory (rings in region 0, Send and PostRx buffers in
// region 1, sized so that every ring can be full), then SetupRing for the
// RX (2p) and TX (2p+1) vring of every queue pair, enabled. When it
// returns the device has handled every message, so it is ready.
func (f *FrontEnd) Start(o Options) {
	f.t.Helper()
	o = o.withDefaults()
	f.opts = &o
	f.Negotiate(o.Features, o.Protocol)
	rings := uint64(2 * o.QueuePairs)
	ringBytes := rings * (uint64(o.RingSize)*32 + 3*4096)
	bufBytes := rings * uint64(o.RingSize) * uint64(o.BufSize)
	f.ShareMemory(max(4<<20, ringBytes), 1<<20+bufBytes)
	f.g.bufSize = o.BufSize
	for p := 0; p < o.QueuePairs; p++ {
		f.SetupRing(2*p, f.NewRing(o.Packed, o.RingSize), true)
		f.SetupRing(2*p+1, f.NewRing(o.Packed, o.RingSize), true)
	}
	if o.Protocol&(1<<vhost.ProtoReplyAck) == 0 {
		// Without acks, a request with a reply of its own orders the
		// device's handling of everything sent before it.
		f.CallU64(ReqGetFeatures)
	}
}

// Negotiate does what QEMU does first: GET_FEATURES, SET_OWNER, the
// protocol features if features has VHOST_USER_F_PROTOCOL_FEATURES, and
// SET_FEATURES. It fails the test if the device does not offer what it
// asks for. Later requests without a reply of their own ask for an ack
// when protocol has REPLY_ACK.
func (f *FrontEnd) Negotiate(features, protocol uint64) {
	f.t.Helper()
	offered := f.CallU64(ReqGetFeatures)
	if features&^offered != 0 {
		f.t.Fatalf("device offers %#x, test wants %#x", offered, features)
	}
	if err := f.SendMsg(ReqSetOwner, FlagVersion, nil); err != nil {
		f.t.Fatal(err)
	}
	if virtq.Has(features, vhost.FeatureProtocolFeatures) {
		if p := f.CallU64(ReqGetProtocolFeatures); protocol&^p != 0 {
			f.t.Fatalf("device offers protocol %#x, test wants %#x", p, protocol)
		}
		if err := f.SendMsg(ReqSetProtocolFeatures, FlagVersion, U64(protocol)); err != nil {
			f.t.Fatal(err)
		}
		f.protocol = protocol
	}
	f.request(ReqSetFeatures, U64(features))
}
