package vswitch

import (
	"encoding/binary"

	"github.com/xvswitch/xvswitch/offload"
)

// Completing the L4 checksums of frames from a NIC whose sender left them
// partial (docs/afxdp-veth.md#checksum-offload-and-other-side-effects-on-the-peer).
//
// A veth peer with TX checksum offload on (the default) hands the kernel
// TCP and UDP with only the pseudo-header sum in the checksum field and
// the rest of the job in the skb's CHECKSUM_PARTIAL metadata; XDP and
// AF_XDP copy mode pass on the bytes without that metadata. The NIC port
// then recomputes the checksum of every TCP and UDP frame it receives,
// in place in its UMEM frame: a frame whose checksum was right keeps it,
// one whose checksum was partial gets the one its sender meant. (A frame
// corrupted on a wire would get a "right" checksum too: that is why only
// virtual NICs do this by default.)

const (
	etherTypeIPv4 = 0x0800
	etherTypeIPv6 = 0x86dd
	etherTypeVLAN = 0x8100
	etherTypeQinQ = 0x88a8

	protoTCP = 6
	protoUDP = 17
)

// completeL4Checksum rewrites the TCP or UDP checksum of an Ethernet frame
// (IPv4, or IPv6 with TCP or UDP as its first next header; up to two VLAN
// tags) to the full one, and reports whether it changed it. Other frames,
// IPv4 fragments, truncated frames and UDP sent without a checksum (zero)
// are left alone. It does not allocate.
func completeL4Checksum(f []byte) bool {
	off := ethHeaderLen
	if len(f) < off {
		return false
	}
	et := binary.BigEndian.Uint16(f[12:])
	for i := 0; i < 2 && (et == etherTypeVLAN || et == etherTypeQinQ); i++ {
		if len(f) < off+4 {
			return false
		}
		et = binary.BigEndian.Uint16(f[off+2:])
		off += 4
	}
	var proto byte
	var l4 []byte
	var sum uint64 // the pseudo-header's words
	switch et {
	case etherTypeIPv4:
		ip := f[off:]
		if len(ip) < 20 || ip[0]>>4 != 4 {
			return false
		}
		ihl := int(ip[0]&0x0f) * 4
		total := int(binary.BigEndian.Uint16(ip[2:]))
		// Fragments: the checksum covers the whole datagram, which this
		// frame is not (the first fragment) or holds no L4 header of.
		if ihl < 20 || total < ihl || total > len(ip) || binary.BigEndian.Uint16(ip[6:])&0x3fff != 0 {
			return false
		}
		proto = ip[9]
		l4 = ip[ihl:total]
		sum = uint64(binary.BigEndian.Uint32(ip[12:])) + uint64(binary.BigEndian.Uint32(ip[16:]))
	case etherTypeIPv6:
		ip := f[off:]
		if len(ip) < 40 || ip[0]>>4 != 6 {
			return false
		}
		plen := int(binary.BigEndian.Uint16(ip[4:]))
		if 40+plen > len(ip) {
			return false
		}
		proto = ip[6]
		l4 = ip[40 : 40+plen]
		for i := 8; i < 40; i += 4 {
			sum += uint64(binary.BigEndian.Uint32(ip[i:]))
		}
	default:
		return false
	}
	var at int // the checksum field's offset in l4
	switch proto {
	case protoTCP:
		if len(l4) < 20 {
			return false
		}
		at = 16
	case protoUDP:
		if len(l4) < 8 || binary.BigEndian.Uint16(l4[6:]) == 0 {
			return false
		}
		// The datagram is UDP's length, as a receiver reads it (bytes the
		// IP packet holds beyond it are not summed).
		ulen := int(binary.BigEndian.Uint16(l4[4:]))
		if ulen < 8 || ulen > len(l4) {
			return false
		}
		l4 = l4[:ulen]
		at = 6
	default:
		return false
	}
	sum += uint64(proto) + uint64(len(l4))
	old := binary.BigEndian.Uint16(l4[at:])
	l4[at], l4[at+1] = 0, 0
	c := offload.ChecksumWith(l4, sum)
	if c == 0 && proto == protoUDP {
		c = 0xffff // zero says "no checksum" in UDP (RFC 768)
	}
	binary.BigEndian.PutUint16(l4[at:], c)
	return c != old
}
