package vhosttest

import "fmt"

// Request is a front-end message type (vhost-user.rst, "Front-end message
// types"). Any value may be sent, including ones the spec does not define.
type Request uint32

// The requests a virtio-net front-end sends.
const (
	ReqGetFeatures         Request = 1
	ReqSetFeatures         Request = 2
	ReqSetOwner            Request = 3
	ReqResetOwner          Request = 4
	ReqSetMemTable         Request = 5
	ReqSetLogBase          Request = 6
	ReqSetLogFD            Request = 7
	ReqSetVringNum         Request = 8
	ReqSetVringAddr        Request = 9
	ReqSetVringBase        Request = 10
	ReqGetVringBase        Request = 11
	ReqSetVringKick        Request = 12
	ReqSetVringCall        Request = 13
	ReqSetVringErr         Request = 14
	ReqGetProtocolFeatures Request = 15
	ReqSetProtocolFeatures Request = 16
	ReqGetQueueNum         Request = 17
	ReqSetVringEnable      Request = 18
	ReqSendRARP            Request = 19
	ReqNetSetMTU           Request = 20
	ReqGetConfig           Request = 24
	ReqSetConfig           Request = 25
	ReqGetMaxMemSlots      Request = 36
	ReqAddMemReg           Request = 37
	ReqRemMemReg           Request = 38
	ReqSetStatus           Request = 39
	ReqGetStatus           Request = 40
)

// String is the request's number: failure messages name what was sent on
// the wire, whatever the test meant by it.
func (r Request) String() string { return fmt.Sprintf("request %d", uint32(r)) }

// Header flags.
const (
	// FlagVersion is protocol version 1 (bits 0-1), which every message
	// carries.
	FlagVersion = 0x1
	// FlagReply marks the back-end's replies.
	FlagReply = 0x4
	// FlagNeedReply asks for a u64 ack (REPLY_ACK): 0 success.
	FlagNeedReply = 0x8
	// ReplyFlags is what a reply must carry, exactly (DPDK's virtio-user
	// rejects any other bit, so Reply does too).
	ReplyFlags = FlagReply | FlagVersion
)

// Sizes of the wire format.
const (
	// HeaderSize is the message header: request, flags, payload size.
	HeaderSize = 12
	// ConfigHeaderSize is the GET/SET_CONFIG payload header: offset,
	// size, flags.
	ConfigHeaderSize = 12
	// NetConfigSize is the virtio-net config space a device serves: mac,
	// status, max_virtqueue_pairs, mtu.
	NetConfigSize = 12
)

// VringNoFD in a SET_VRING_KICK/CALL/ERR payload says no fd comes with it
// (the ring is polled, or wants no interrupts).
const VringNoFD = 0x100
