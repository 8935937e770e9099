package vhost

import (
	"github.com/xvswitch/xvswitch/virtionet"
	"github.com/xvswitch/xvswitch/virtq"
)

// offeredFeatures is the virtio feature word GET_FEATURES returns.
// Checksum and TCP segmentation offloads both ways (docs/offloads.md)
// unless Config.NoOffloads: the switch passes a guest's partial checksums
// and TSO frames to guests that take them and finishes them in software
// for the others and for NICs (AF_XDP has no TSO). No UFO/USO and no ECN:
// nothing finishes those. No CTRL_VQ: a front-end that wants one (QEMU,
// virtio-user) emulates it, CTRL_GUEST_OFFLOADS with it.
func offeredFeatures(cfg *Config) uint64 {
	f := uint64(1)<<virtq.FeatureVersion1 |
		1<<virtq.FeatureRingPacked |
		1<<virtq.FeatureEventIdx |
		1<<virtq.FeatureIndirectDesc |
		1<<NetFeatureMrgRxbuf |
		1<<NetFeatureStatus |
		1<<NetFeatureGuestAnnounce |
		1<<FeatureLogAll |
		1<<FeatureProtocolFeatures
	if !cfg.NoInOrder {
		f |= 1 << virtq.FeatureInOrder
	}
	if !cfg.NoOffloads {
		f |= offeredOffloads
	}
	if cfg.MTU != 0 {
		f |= 1 << NetFeatureMTU
	}
	if cfg.MAC != nil {
		f |= 1 << NetFeatureMAC
	}
	if cfg.QueuePairs > 1 {
		f |= 1 << NetFeatureMQ
	}
	return f &^ cfg.DisableFeatures
}

// offeredOffloads are the offload bits offered unless Config.NoOffloads.
const offeredOffloads = uint64(1)<<virtionet.FeatureCsum |
	1<<virtionet.FeatureGuestCsum |
	1<<virtionet.FeatureHostTSO4 |
	1<<virtionet.FeatureHostTSO6 |
	1<<virtionet.FeatureGuestTSO4 |
	1<<virtionet.FeatureGuestTSO6

// offeredProtocolFeatures is what GET_PROTOCOL_FEATURES returns. RARP is
// offered because SEND_RARP is how a migrated guest without GUEST_ANNOUNCE
// gets announced. LOG_SHMFD is what QEMU needs, with VHOST_F_LOG_ALL, to
// allow migration at all (the dirty log in a memfd it shares). CONFIG is offered for front-ends that read the device
// config through GET_CONFIG (QEMU's virtio-net masks it and serves the
// config space itself).
const offeredProtocolFeatures = uint64(1)<<ProtoMQ |
	1<<ProtoLogShmFD |
	1<<ProtoRARP |
	1<<ProtoReplyAck |
	1<<ProtoMTU |
	1<<ProtoConfig |
	1<<ProtoConfigureMemSlots |
	1<<ProtoStatus
