package offload

import "encoding/binary"

// Header sizes and field offsets this package reads and rewrites.
const (
	ethLen     = 14
	vlanLen    = 4
	ipv4MinLen = 20
	ipv6Len    = 40
	tcpMinLen  = 20

	etherTypeIPv4 = 0x0800
	etherTypeIPv6 = 0x86dd
	etherTypeVLAN = 0x8100 // 802.1Q
	etherTypeQinQ = 0x88a8 // 802.1ad, the outer tag of a double-tagged frame
	protoTCP      = 6
)

// tcpFrame locates the headers of an Ethernet frame carrying one TCP
// segment (the frame a guest hands over for TSO).
type tcpFrame struct {
	l3, l4, payload int // offsets of the IP header, the TCP header, the payload
	v6              bool
}

// parseTCP checks frame is Ethernet (one VLAN tag at most), IPv4 without
// fragmentation or IPv6 without extension headers (as v6 says), then TCP,
// all inside frame. The IP length fields are not trusted: each segment
// gets them from its own length.
func parseTCP(frame []byte, v6 bool) (tcpFrame, error) {
	var t tcpFrame
	if len(frame) < ethLen {
		return t, ErrHeaders
	}
	t.l3 = ethLen
	et := binary.BigEndian.Uint16(frame[12:])
	if et == etherTypeVLAN || et == etherTypeQinQ {
		if len(frame) < ethLen+vlanLen {
			return t, ErrHeaders
		}
		t.l3 += vlanLen
		et = binary.BigEndian.Uint16(frame[16:])
	}
	ip := frame[t.l3:]
	switch {
	case !v6 && et == etherTypeIPv4:
		if len(ip) < ipv4MinLen || ip[0]>>4 != 4 {
			return t, ErrHeaders
		}
		ihl := int(ip[0]&0xf) * 4
		frag := binary.BigEndian.Uint16(ip[6:])
		if ihl < ipv4MinLen || ihl > len(ip) || ip[9] != protoTCP || frag&0x3fff != 0 {
			return t, ErrHeaders // MF or an offset: a fragment
		}
		t.l4 = t.l3 + ihl
	case v6 && et == etherTypeIPv6:
		if len(ip) < ipv6Len || ip[0]>>4 != 6 || ip[6] != protoTCP {
			return t, ErrHeaders
		}
		t.l4 = t.l3 + ipv6Len
		t.v6 = true
	default:
		return t, ErrHeaders
	}
	if len(frame)-t.l4 < tcpMinLen {
		return t, ErrHeaders
	}
	doff := int(frame[t.l4+12]>>4) * 4
	if doff < tcpMinLen || doff > len(frame)-t.l4 {
		return t, ErrHeaders
	}
	t.payload = t.l4 + doff
	return t, nil
}

// pseudoSum is the ones'-complement sum of the TCP pseudo-header of the
// segment seg (whose headers t located) with a TCP length of l4len.
func (t *tcpFrame) pseudoSum(seg []byte, l4len int) uint64 {
	var acc uint64
	if t.v6 {
		acc = sum(seg[t.l3+8:t.l3+40], 0) // source and destination
	} else {
		acc = sum(seg[t.l3+12:t.l3+20], 0)
	}
	return acc + protoTCP + uint64(l4len)
}
