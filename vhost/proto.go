package vhost

import "fmt"

// request is a front-end message type (vhost-user.rst, "Front-end message
// types").
type request uint32

const (
	reqGetFeatures         request = 1
	reqSetFeatures         request = 2
	reqSetOwner            request = 3
	reqResetOwner          request = 4
	reqSetMemTable         request = 5
	reqSetLogBase          request = 6
	reqSetLogFD            request = 7
	reqSetVringNum         request = 8
	reqSetVringAddr        request = 9
	reqSetVringBase        request = 10
	reqGetVringBase        request = 11
	reqSetVringKick        request = 12
	reqSetVringCall        request = 13
	reqSetVringErr         request = 14
	reqGetProtocolFeatures request = 15
	reqSetProtocolFeatures request = 16
	reqGetQueueNum         request = 17
	reqSetVringEnable      request = 18
	reqSendRARP            request = 19
	reqNetSetMTU           request = 20
	reqGetConfig           request = 24
	reqSetConfig           request = 25
	reqGetMaxMemSlots      request = 36
	reqAddMemReg           request = 37
	reqRemMemReg           request = 38
	reqSetStatus           request = 39
	reqGetStatus           request = 40
)

var requestNames = map[request]string{
	reqGetFeatures: "GET_FEATURES", reqSetFeatures: "SET_FEATURES",
	reqSetOwner: "SET_OWNER", reqResetOwner: "RESET_OWNER",
	reqSetMemTable: "SET_MEM_TABLE", reqSetLogBase: "SET_LOG_BASE",
	reqSetLogFD: "SET_LOG_FD", reqSetVringNum: "SET_VRING_NUM",
	reqSetVringAddr: "SET_VRING_ADDR", reqSetVringBase: "SET_VRING_BASE",
	reqGetVringBase: "GET_VRING_BASE", reqSetVringKick: "SET_VRING_KICK",
	reqSetVringCall: "SET_VRING_CALL", reqSetVringErr: "SET_VRING_ERR",
	reqGetProtocolFeatures: "GET_PROTOCOL_FEATURES", reqSetProtocolFeatures: "SET_PROTOCOL_FEATURES",
	reqGetQueueNum: "GET_QUEUE_NUM", reqSetVringEnable: "SET_VRING_ENABLE",
	reqSendRARP: "SEND_RARP", reqNetSetMTU: "NET_SET_MTU",
	reqGetConfig: "GET_CONFIG", reqSetConfig: "SET_CONFIG",
	reqGetMaxMemSlots: "GET_MAX_MEM_SLOTS", reqAddMemReg: "ADD_MEM_REG",
	reqRemMemReg: "REM_MEM_REG", reqSetStatus: "SET_STATUS", reqGetStatus: "GET_STATUS",
}

func (r request) String() string {
	if n, ok := requestNames[r]; ok {
		return n
	}
	return fmt.Sprintf("request(%d)", uint32(r))
}

// hasReply reports whether the message always gets a reply, REPLY_ACK or
// not. For these the NEED_REPLY flag changes nothing.
func (r request) hasReply() bool {
	switch r {
	case reqGetFeatures, reqGetProtocolFeatures, reqGetVringBase, reqGetQueueNum,
		reqGetConfig, reqGetMaxMemSlots, reqGetStatus,
		// With LOG_SHMFD, QEMU waits for an (empty) reply once the log
		// is mapped (vhost_user_set_log_base).
		reqSetLogBase:
		return true
	}
	return false
}

// Header flags.
const (
	flagVersion   = 0x1 // bits 0-1: protocol version 1
	flagVersionMk = 0x3
	flagReply     = 0x4
	flagNeedReply = 0x8
	// replyFlags is what every reply carries, exactly: DPDK's virtio-user
	// rejects a reply with any other bit set.
	replyFlags = flagReply | flagVersion
)

const (
	headerSize = 12
	// maxPayload bounds a message body. The largest legitimate one is
	// GET_CONFIG with a full config space (12 + 256 bytes); SET_MEM_TABLE
	// is 8 + 8*32. Anything larger is garbage or hostile, and since the
	// stream cannot be resynchronised, the connection is closed.
	maxPayload = 4096
	// maxFDs is the most descriptors one message carries (SET_MEM_TABLE:
	// one per region, 8 regions).
	maxFDs = 8
)

// vring index payload bits of SET_VRING_KICK/CALL/ERR.
const (
	vringIndexMask = 0xff
	vringNoFD      = 0x100
)

// Protocol feature bits (VHOST_USER_PROTOCOL_F_*).
const (
	ProtoMQ                = 0
	ProtoLogShmFD          = 1
	ProtoRARP              = 2
	ProtoReplyAck          = 3
	ProtoMTU               = 4
	ProtoBackendReq        = 5
	ProtoConfig            = 9
	ProtoConfigureMemSlots = 15
	ProtoStatus            = 16
)

// FeatureProtocolFeatures is VHOST_USER_F_PROTOCOL_FEATURES: the back-end
// speaks GET/SET_PROTOCOL_FEATURES.
const FeatureProtocolFeatures = 30

// FeatureLogAll is VHOST_F_LOG_ALL: the front-end may ask for every write
// to guest memory to be logged (live migration, dirtylog.go).
const FeatureLogAll = 26

// virtio-net feature bits the device offers (virtio spec 5.1.3).
const (
	NetFeatureMTU      = 3  // VIRTIO_NET_F_MTU
	NetFeatureMAC      = 5  // VIRTIO_NET_F_MAC
	NetFeatureMrgRxbuf = 15 // VIRTIO_NET_F_MRG_RXBUF
	NetFeatureStatus   = 16 // VIRTIO_NET_F_STATUS
	NetFeatureMQ       = 22 // VIRTIO_NET_F_MQ
	// NetFeatureGuestAnnounce lets the guest announce itself after a
	// migration (VIRTIO_NET_F_GUEST_ANNOUNCE). QEMU serves it (the
	// announce status bit, the control queue's ack) and, for a guest that
	// negotiated it, sends no SEND_RARP.
	NetFeatureGuestAnnounce = 21
)

// Device status bits (virtio spec 2.1).
const (
	StatusAcknowledge      = 0x01
	StatusDriver           = 0x02
	StatusDriverOK         = 0x04
	StatusFeaturesOK       = 0x08
	StatusNeedsReset       = 0x40
	StatusFailed           = 0x80
	netConfigStatusLinkUp  = 1 // VIRTIO_NET_S_LINK_UP in the config space status
	maxMemSlots            = 32
	maxQueueSize           = 32768
	minMTU, maxMTU         = 68, 65535
	virtioNetConfigSize    = 12 // mac[6] status u16 max_virtqueue_pairs u16 mtu u16
	memRegionDescSize      = 32
	memTableHeaderSize     = 8
	vringStateSize         = 8
	vringAddrSize          = 40
	configSpaceHeaderSize  = 12
	singleMemRegionMsgSize = 8 + memRegionDescSize
)
