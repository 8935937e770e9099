package afpacket

import (
	"encoding/binary"
	"errors"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// The layout of a TPACKET_V2 slot: struct tpacket2_hdr (32 bytes once
// aligned to TPACKET_ALIGNMENT), a struct sockaddr_ll (20 bytes), then,
// at tp_mac, the frame.
const (
	offLen      = 4  // tp_len: the frame's length as it arrived
	offSnaplen  = 8  // tp_snaplen: how much of it is in the slot
	offMac      = 12 // tp_mac: where in the slot the frame starts
	offVLANTCI  = 24 // tp_vlan_tci
	offVLANTPID = 26 // tp_vlan_tpid
	// slotHdrLen is TPACKET2_HDRLEN: no frame byte may start before it.
	slotHdrLen = 32 + unix.SizeofSockaddrLinklayer
	// vlanLen is one 802.1Q tag, and the headroom the socket reserves
	// (PACKET_RESERVE) in front of each frame to put it back.
	vlanLen = 4
	// macAddrsLen: the two MACs a tag goes after.
	macAddrsLen = 12
)

// Frame is one frame of the ring.
type Frame struct {
	// Data is the frame, its VLAN tag put back if the kernel had taken it
	// out: a view of the ring valid until Release. Nil when the kernel's
	// header did not describe a frame inside its slot (never seen: the
	// caller counts it as malformed).
	Data []byte
	// WireLen is the frame's length as it arrived (with its tag): longer
	// than Data when the slot could not hold it (the kernel truncated it).
	WireLen int
	// CsumPartial: the kernel marked its TCP or UDP checksum as not yet
	// computed (TP_STATUS_CSUMNOTREADY: a sender with checksum offload, a
	// veth's peer).
	CsumPartial bool
}

// Truncated says the slot did not hold the whole frame.
func (f *Frame) Truncated() bool { return len(f.Data) < f.WireLen }

// ring is the process's side of a TPACKET_V2 receive ring: the kernel
// fills slots in order and hands each over by setting TP_STATUS_USER; the
// process reads them in the same order and gives them back, in order, by
// setting TP_STATUS_KERNEL. So its position is one index and a count.
type ring struct {
	mem      []byte
	slotSize int
	status   []*atomic.Uint32 // each slot's tp_status
	head     int              // the oldest slot the process holds, or the next it waits on
	held     int              // slots received and not yet released
}

var errRingLayout = errors.New("afpacket: ring layout")

func newRing(mem []byte, slotSize, slots int) (*ring, error) {
	if slotSize < slotHdrLen+vlanLen+macAddrsLen || slotSize%16 != 0 || slots <= 0 || slots*slotSize > len(mem) {
		return nil, errRingLayout
	}
	r := &ring{mem: mem, slotSize: slotSize, status: make([]*atomic.Uint32, slots)}
	for i := range r.status {
		w, err := statusWord(mem, i*slotSize)
		if err != nil {
			return nil, err
		}
		r.status[i] = w
	}
	return r, nil
}

// receive fills out with the frames the kernel has handed over, up to
// len(out) and up to a full ring held, and returns how many. They stay
// the process's until release.
func (r *ring) receive(out []Frame) int {
	n := 0
	for n < len(out) && r.held < len(r.status) {
		i := r.head + r.held
		if i >= len(r.status) {
			i -= len(r.status)
		}
		st := r.status[i].Load()
		if st&unix.TP_STATUS_USER == 0 {
			break
		}
		out[n] = r.frame(r.mem[i*r.slotSize:(i+1)*r.slotSize], st)
		r.held++
		n++
	}
	return n
}

// frame reads a slot the process owns. The kernel's offsets are checked
// against the slot before any byte is sliced.
func (r *ring) frame(slot []byte, st uint32) Frame {
	ne := binary.NativeEndian
	wire := int(ne.Uint32(slot[offLen:]))
	snap := int(ne.Uint32(slot[offSnaplen:]))
	mac := int(ne.Uint16(slot[offMac:]))
	if mac < slotHdrLen || snap < 0 || snap > len(slot)-mac {
		return Frame{WireLen: wire}
	}
	f := Frame{Data: slot[mac : mac+snap], WireLen: wire, CsumPartial: st&unix.TP_STATUS_CSUMNOTREADY != 0}
	if st&unix.TP_STATUS_VLAN_VALID == 0 {
		return f
	}
	// The tag goes back between the MACs and the EtherType: the two MACs
	// move 4 bytes down, into the headroom PACKET_RESERVE keeps. A frame
	// that cannot have it back is not handed on untagged (it would land
	// in the wrong VLAN).
	m := mac - vlanLen
	if m < slotHdrLen || snap < macAddrsLen {
		return Frame{WireLen: wire + vlanLen}
	}
	tpid := uint16(unix.ETH_P_8021Q)
	if st&unix.TP_STATUS_VLAN_TPID_VALID != 0 {
		tpid = ne.Uint16(slot[offVLANTPID:])
	}
	tci := ne.Uint16(slot[offVLANTCI:])
	copy(slot[m:m+macAddrsLen], slot[mac:mac+macAddrsLen])
	binary.BigEndian.PutUint16(slot[m+macAddrsLen:], tpid)
	binary.BigEndian.PutUint16(slot[m+macAddrsLen+2:], tci)
	f.Data = slot[m : mac+snap]
	f.WireLen += vlanLen
	return f
}

// release gives every held slot back to the kernel, oldest first.
func (r *ring) release() {
	for ; r.held > 0; r.held-- {
		r.status[r.head].Store(unix.TP_STATUS_KERNEL)
		if r.head++; r.head == len(r.status) {
			r.head = 0
		}
	}
}
