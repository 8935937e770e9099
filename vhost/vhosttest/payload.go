package vhosttest

import "encoding/binary"

// Payload encoders (vhost-user.rst, "Payload"): little-endian, the byte
// order of every host vhost-user runs on. Hostile tests use them to build
// messages the front-end would never send on its own.

var le = binary.LittleEndian

// Header encodes a message header announcing size payload bytes, which need
// not follow (a test of truncated or oversized messages).
func Header(req Request, flags, size uint32) []byte {
	b := make([]byte, HeaderSize)
	le.PutUint32(b[0:], uint32(req))
	le.PutUint32(b[4:], flags)
	le.PutUint32(b[8:], size)
	return b
}

// Message encodes a whole message: header and payload.
func Message(req Request, flags uint32, payload []byte) []byte {
	return append(Header(req, flags, uint32(len(payload))), payload...)
}

// U64 is the payload of the many requests that carry one number.
func U64(v uint64) []byte {
	b := make([]byte, 8)
	le.PutUint64(b, v)
	return b
}

// VringState is the "vring state description": a vring index and a number
// (size, base, or enable).
func VringState(index, num uint32) []byte {
	b := make([]byte, 8)
	le.PutUint32(b[0:], index)
	le.PutUint32(b[4:], num)
	return b
}

// ParseVringState decodes a GET_VRING_BASE reply; ok is false if it is
// short.
func ParseVringState(p []byte) (index, num uint32, ok bool) {
	if len(p) < 8 {
		return 0, 0, false
	}
	return le.Uint32(p[0:]), le.Uint32(p[4:]), true
}

// VringAddr is the "vring address description" with no flags and no log
// address. The wire order is descriptor, used (device area), available
// (driver area).
func VringAddr(index uint32, desc, used, avail uint64) []byte {
	b := make([]byte, 40)
	le.PutUint32(b[0:], index)
	le.PutUint64(b[8:], desc)
	le.PutUint64(b[16:], used)
	le.PutUint64(b[24:], avail)
	return b
}

// Region is one guest memory region as SET_MEM_TABLE and ADD/REM_MEM_REG
// describe it.
type Region struct {
	GuestAddr, Size, UserAddr, MmapOffset uint64
}

// Bytes encodes the region description.
func (r Region) Bytes() []byte {
	b := make([]byte, 32)
	le.PutUint64(b[0:], r.GuestAddr)
	le.PutUint64(b[8:], r.Size)
	le.PutUint64(b[16:], r.UserAddr)
	le.PutUint64(b[24:], r.MmapOffset)
	return b
}

// MemTable is the SET_MEM_TABLE payload: a count, padding, the regions.
// The regions' fds go with the message, in the same order.
func MemTable(rs ...Region) []byte {
	b := make([]byte, 8)
	le.PutUint32(b, uint32(len(rs)))
	for _, r := range rs {
		b = append(b, r.Bytes()...)
	}
	return b
}

// MemReg is the ADD_MEM_REG and REM_MEM_REG payload: padding, one region.
func MemReg(r Region) []byte { return append(make([]byte, 8), r.Bytes()...) }

// ConfigRequest is a GET_CONFIG payload asking for size bytes of the
// config space from offset: the header, then room for the answer.
func ConfigRequest(offset, size uint32) []byte {
	b := make([]byte, ConfigHeaderSize+size)
	le.PutUint32(b[0:], offset)
	le.PutUint32(b[4:], size)
	return b
}
