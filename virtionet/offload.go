package virtionet

import "encoding/binary"

// Offload feature bits of the virtio-net device (virtio 1.1, 5.1.3): what a
// guest may leave to the device (HOST_*: checksums and segmentation of the
// frames it sends) and what it accepts from it (GUEST_*: frames it
// receives with a partial checksum, or larger than its MTU).
const (
	FeatureCtrlGuestOffloads = 2  // VIRTIO_NET_F_CTRL_GUEST_OFFLOADS: needs CTRL_VQ, not offered
	FeatureGuestTSO4         = 7  // VIRTIO_NET_F_GUEST_TSO4
	FeatureGuestTSO6         = 8  // VIRTIO_NET_F_GUEST_TSO6
	FeatureGuestECN          = 9  // VIRTIO_NET_F_GUEST_ECN: not offered
	FeatureGuestUFO          = 10 // VIRTIO_NET_F_GUEST_UFO: not offered
	FeatureHostTSO4          = 11 // VIRTIO_NET_F_HOST_TSO4
	FeatureHostTSO6          = 12 // VIRTIO_NET_F_HOST_TSO6
	FeatureHostECN           = 13 // VIRTIO_NET_F_HOST_ECN: not offered
	FeatureHostUFO           = 14 // VIRTIO_NET_F_HOST_UFO: not offered
)

// virtio_net_hdr flags and gso_type values (virtio 1.1, 5.1.6).
const (
	FlagNeedsCsum = 1 // VIRTIO_NET_HDR_F_NEEDS_CSUM: csum_start/csum_offset are valid
	FlagDataValid = 2 // VIRTIO_NET_HDR_F_DATA_VALID: device to driver only

	GSONone  = 0    // VIRTIO_NET_HDR_GSO_NONE
	GSOTCPv4 = 1    // VIRTIO_NET_HDR_GSO_TCPV4
	GSOUDP   = 3    // VIRTIO_NET_HDR_GSO_UDP (UFO): not offered
	GSOTCPv6 = 4    // VIRTIO_NET_HDR_GSO_TCPV6
	GSOECN   = 0x80 // VIRTIO_NET_HDR_GSO_ECN: needs HOST_ECN, not offered
)

// MaxGSOFrameLen bounds a frame a guest sends for segmentation (GSO):
// an IP packet of at most 64 KiB behind an Ethernet header and one VLAN
// tag. A longer one is a DropGSOTooLong.
const MaxGSOFrameLen = 64<<10 + EthHeaderLen + VLANTagLen

// Offload is a frame's offload metadata: the first ten bytes of its
// virtio-net header (flags, gso_type, hdr_len, gso_size, csum_start,
// csum_offset), without num_buffers. It is kept as the header's own
// little-endian words so that writing it into a receive buffer is the same
// two fixed-size stores a plain frame's header costs (rxfast.go). The zero
// Offload is a plain frame: complete checksums, no segmentation.
type Offload struct {
	lo         uint64 // header bytes 0-7, little-endian
	csumOffset uint16 // header bytes 8-9
}

// MakeOffload builds the metadata of a header's offload fields.
func MakeOffload(h Header) Offload {
	return Offload{
		lo: uint64(h.Flags) | uint64(h.GSOType)<<8 | uint64(h.HdrLen)<<16 |
			uint64(h.GSOSize)<<32 | uint64(h.CsumStart)<<48,
		csumOffset: h.CsumOffset,
	}
}

// offloadFrom reads the metadata from the first LegacyHeaderLen bytes of b.
func offloadFrom(b []byte) Offload {
	return Offload{lo: binary.LittleEndian.Uint64(b), csumOffset: binary.LittleEndian.Uint16(b[8:])}
}

// IsZero reports a plain frame.
func (o Offload) IsZero() bool { return o == Offload{} }

// Header returns the metadata as a header (NumBuffers 0), for logs and
// tests.
func (o Offload) Header() Header {
	return Header{Flags: o.Flags(), GSOType: o.GSOType(), HdrLen: uint16(o.lo >> 16),
		GSOSize: o.GSOSize(), CsumStart: o.CsumStart(), CsumOffset: o.CsumOffset()}
}

func (o Offload) Flags() uint8       { return uint8(o.lo) }
func (o Offload) GSOType() uint8     { return uint8(o.lo >> 8) }
func (o Offload) GSOSize() uint16    { return uint16(o.lo >> 32) }
func (o Offload) CsumStart() uint16  { return uint16(o.lo >> 48) }
func (o Offload) CsumOffset() uint16 { return o.csumOffset }

// NeedsCsum reports a partial checksum: the device (or the receiving
// guest) must fold the bytes from CsumStart into the 16 bits at
// CsumStart+CsumOffset.
func (o Offload) NeedsCsum() bool { return o.Flags()&FlagNeedsCsum != 0 }

// GSO reports a frame to be segmented into GSOSize-byte payloads.
func (o Offload) GSO() bool { return o.GSOType() != GSONone }

// WithFlags returns o with its flags replaced (DataValid for a checksum
// the switch verified, say).
func (o Offload) WithFlags(f uint8) Offload {
	o.lo = o.lo&^0xff | uint64(f)
	return o
}

// Offloads says which offloads a queue's guest negotiated, from its
// feature word.
type Offloads struct {
	Csum      bool // TX: the guest may send NEEDS_CSUM (VIRTIO_NET_F_CSUM)
	TSO4      bool // TX: GSO_TCPV4 (HOST_TSO4)
	TSO6      bool // TX: GSO_TCPV6 (HOST_TSO6)
	GuestCsum bool // RX: the guest takes NEEDS_CSUM frames (GUEST_CSUM)
	GuestTSO4 bool // RX: the guest takes GSO_TCPV4 frames (GUEST_TSO4)
	GuestTSO6 bool // RX: the guest takes GSO_TCPV6 frames (GUEST_TSO6)
}

// OffloadsOf reads the negotiated offloads from a feature word. A TSO bit
// counts only with its checksum bit, as the spec requires them together
// (5.1.3.1).
func OffloadsOf(features uint64) Offloads {
	has := func(b uint) bool { return features&(1<<b) != 0 }
	o := Offloads{Csum: has(FeatureCsum), GuestCsum: has(FeatureGuestCsum)}
	o.TSO4 = o.Csum && has(FeatureHostTSO4)
	o.TSO6 = o.Csum && has(FeatureHostTSO6)
	o.GuestTSO4 = o.GuestCsum && has(FeatureGuestTSO4)
	o.GuestTSO6 = o.GuestCsum && has(FeatureGuestTSO6)
	return o
}

// Accepts reports whether a guest with these offloads may receive a frame
// with metadata o as it is; otherwise the switch completes its checksum or
// segments it first.
func (n Offloads) Accepts(o Offload) bool {
	switch o.GSOType() {
	case GSONone:
	case GSOTCPv4:
		if !n.GuestTSO4 {
			return false
		}
	case GSOTCPv6:
		if !n.GuestTSO6 {
			return false
		}
	default:
		return false
	}
	return !o.NeedsCsum() || n.GuestCsum
}

// checkOffload validates the metadata a guest sent with a frame of flen
// bytes against what it negotiated, and returns it cleaned (flags the
// driver must not set cleared) or a drop reason. Nothing here trusts the
// guest: every offset is checked against the frame, so that completing
// the checksum or segmenting later writes only inside the frame's copy.
func (n Offloads) checkOffload(o Offload, flen int) (Offload, DropReason, bool) {
	o = o.WithFlags(o.Flags() & FlagNeedsCsum)
	if o.NeedsCsum() && int(o.CsumStart())+int(o.CsumOffset())+2 > flen {
		return Offload{}, DropBadCsumOffset, false
	}
	switch o.GSOType() {
	case GSONone:
		if o.NeedsCsum() {
			return o, 0, true
		}
		return Offload{}, 0, true // a zero header, or only noise in unused fields
	case GSOTCPv4:
		if !n.TSO4 {
			return Offload{}, DropBadGSOType, false
		}
	case GSOTCPv6:
		if !n.TSO6 {
			return Offload{}, DropBadGSOType, false
		}
	default: // UFO, ECN, USO and anything undefined: never offered
		return Offload{}, DropBadGSOType, false
	}
	switch {
	case !o.NeedsCsum():
		return Offload{}, DropGSOWithoutCsum, false
	case flen > MaxGSOFrameLen:
		return Offload{}, DropGSOTooLong, false
	case o.GSOSize() == 0 || int(o.GSOSize()) > flen:
		return Offload{}, DropBadGSOSize, false
	}
	return o, 0, true
}
