package offload

import "encoding/binary"

// sum adds b to the ones'-complement sum acc (RFC 1071), as 16-bit
// big-endian words; an odd last byte is padded with zero. It adds 32-bit
// words (two 16-bit ones each; fold's end-around carries make that the
// same sum), two per 8 bytes, which is less work than splitting a 64-bit
// load into four. The 64-bit accumulator cannot overflow for any frame
// this package sees (64 KiB adds at most 2^46).
func sum(b []byte, acc uint64) uint64 {
	for len(b) >= 8 {
		acc += uint64(binary.BigEndian.Uint32(b)) + uint64(binary.BigEndian.Uint32(b[4:]))
		b = b[8:]
	}
	if len(b) >= 4 {
		acc += uint64(binary.BigEndian.Uint32(b))
		b = b[4:]
	}
	if len(b) >= 2 {
		acc += uint64(binary.BigEndian.Uint16(b))
		b = b[2:]
	}
	if len(b) == 1 {
		acc += uint64(b[0]) << 8
	}
	return acc
}

// fold reduces a ones'-complement sum to 16 bits.
func fold(acc uint64) uint16 {
	for acc>>16 != 0 {
		acc = acc&0xffff + acc>>16
	}
	return uint16(acc)
}

// Checksum is the Internet checksum of b: the complement of its folded
// ones'-complement sum. A valid packet checksummed with its checksum field
// in place gives 0.
func Checksum(b []byte) uint16 { return ^fold(sum(b, 0)) }

// ChecksumWith is the checksum of b with acc, a ones'-complement sum of
// words that are not in b (a pseudo-header's: addresses, protocol,
// length, as 16- or 32-bit big-endian words), added in: a TCP or UDP
// checksum over its datagram b, with the field in b zeroed.
func ChecksumWith(b []byte, acc uint64) uint16 { return ^fold(sum(b, acc)) }

// CompletePartial finishes a partial checksum in place, as a virtio-net
// device does for NEEDS_CSUM (virtio 1.1, 5.1.6.2): the sender left the
// pseudo-header's sum in the 16-bit field at start+offset; the checksum of
// frame[start:] (that field included) goes there. A result of 0 is written
// as 0xffff, which means the same in ones'-complement and is what UDP
// needs (0 there means "no checksum"). It fails, writing nothing, if the
// field is not inside frame.
func CompletePartial(frame []byte, start, offset int) error {
	if start < 0 || offset < 0 || start > len(frame) || offset > len(frame)-start-2 {
		return ErrChecksumOutside
	}
	field := frame[start+offset:]
	c := ^fold(sum(frame[start:], 0))
	if c == 0 {
		c = 0xffff
	}
	binary.BigEndian.PutUint16(field, c)
	return nil
}
