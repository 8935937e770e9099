package virtq

// Feature bits of the virtio spec that change how a ring behaves.
const (
	FeatureIndirectDesc = 28 // VIRTIO_F_INDIRECT_DESC (VIRTIO_RING_F_INDIRECT_DESC)
	FeatureEventIdx     = 29 // VIRTIO_F_EVENT_IDX (VIRTIO_RING_F_EVENT_IDX)
	FeatureVersion1     = 32 // VIRTIO_F_VERSION_1
	FeatureRingPacked   = 34 // VIRTIO_F_RING_PACKED
	FeatureInOrder      = 35 // VIRTIO_F_IN_ORDER
)

// Has reports whether bit is set in the feature word f.
func Has(f uint64, bit uint) bool { return f&(1<<bit) != 0 }
