package virtionet

// Feature bits of the virtio-net device (virtio 1.1, 5.1.3) that a vhost-user
// back-end negotiates. The ring-level bits live in virtq.
const (
	FeatureCsum      = 0  // VIRTIO_NET_F_CSUM: not offered (no offloads)
	FeatureGuestCsum = 1  // VIRTIO_NET_F_GUEST_CSUM: not offered
	FeatureMTU       = 3  // VIRTIO_NET_F_MTU: config.mtu is valid
	FeatureMAC       = 5  // VIRTIO_NET_F_MAC: config.mac is valid
	FeatureMrgRxbuf  = 15 // VIRTIO_NET_F_MRG_RXBUF: a frame may span RX buffers
	FeatureStatus    = 16 // VIRTIO_NET_F_STATUS: config.status is valid
	FeatureCtrlVQ    = 17 // VIRTIO_NET_F_CTRL_VQ: not offered
	FeatureMQ        = 22 // VIRTIO_NET_F_MQ: config.max_virtqueue_pairs is valid
)

// EthHeaderLen and VLANTagLen size the largest frame a given MTU allows.
const (
	EthHeaderLen = 14
	VLANTagLen   = 4
)

// MaxFrameLen is the longest Ethernet frame (without FCS and without the
// virtio-net header) a port with this MTU carries: the MTU, the Ethernet
// header and one VLAN tag.
func MaxFrameLen(mtu int) int { return mtu + EthHeaderLen + VLANTagLen }

// RxQueueIndex is the guest's receive queue of a queue pair (virtio-net
// queues come in pairs: receiveq k is 2k, transmitq k is 2k+1).
func RxQueueIndex(pair int) int { return 2 * pair }

// TxQueueIndex is the guest's transmit queue of a queue pair.
func TxQueueIndex(pair int) int { return 2*pair + 1 }
