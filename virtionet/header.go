package virtionet

import (
	"encoding/binary"

	"github.com/xvswitch/xvswitch/virtq"
)

// HeaderLen is the size of struct virtio_net_hdr when VERSION_1 or MRG_RXBUF
// is negotiated: flags, gso_type, hdr_len, gso_size, csum_start,
// csum_offset, num_buffers. LegacyHeaderLen is the pre-1.0 header without
// num_buffers, used only when neither is negotiated.
const (
	HeaderLen       = 12
	LegacyHeaderLen = 10
)

// numBuffersOff is where num_buffers sits in the 12-byte header.
const numBuffersOff = 10

// HeaderLenFor returns the header size the negotiated features imply.
func HeaderLenFor(features uint64) int {
	if virtq.Has(features, virtq.FeatureVersion1) || virtq.Has(features, FeatureMrgRxbuf) {
		return HeaderLen
	}
	return LegacyHeaderLen
}

// Header is struct virtio_net_hdr (virtio 1.1, 5.1.6). xvswitch offers no
// offloads, so on RX it writes only NumBuffers and on TX it ignores the
// whole header; the type exists for tests and for logs.
type Header struct {
	Flags      uint8
	GSOType    uint8
	HdrLen     uint16
	GSOSize    uint16
	CsumStart  uint16
	CsumOffset uint16
	NumBuffers uint16
}

// Encode writes h into b, little-endian; b needs HeaderLen bytes (or
// LegacyHeaderLen, in which case NumBuffers is left out). It panics if b is
// shorter than that: the caller sizes b.
func (h *Header) Encode(b []byte) {
	_ = b[LegacyHeaderLen-1]
	b[0] = h.Flags
	b[1] = h.GSOType
	binary.LittleEndian.PutUint16(b[2:], h.HdrLen)
	binary.LittleEndian.PutUint16(b[4:], h.GSOSize)
	binary.LittleEndian.PutUint16(b[6:], h.CsumStart)
	binary.LittleEndian.PutUint16(b[8:], h.CsumOffset)
	if len(b) >= HeaderLen {
		binary.LittleEndian.PutUint16(b[numBuffersOff:], h.NumBuffers)
	}
}

// DecodeHeader reads a header from b (HeaderLen bytes, or LegacyHeaderLen
// for a legacy header without NumBuffers). A shorter b (guest bytes may be
// anything) yields the zero Header.
func DecodeHeader(b []byte) Header {
	if len(b) < LegacyHeaderLen {
		return Header{}
	}
	h := Header{
		Flags:      b[0],
		GSOType:    b[1],
		HdrLen:     binary.LittleEndian.Uint16(b[2:]),
		GSOSize:    binary.LittleEndian.Uint16(b[4:]),
		CsumStart:  binary.LittleEndian.Uint16(b[6:]),
		CsumOffset: binary.LittleEndian.Uint16(b[8:]),
	}
	if len(b) >= HeaderLen {
		h.NumBuffers = binary.LittleEndian.Uint16(b[numBuffersOff:])
	}
	return h
}
