package offload

import "encoding/binary"

// TCP flags a segmenter treats specially.
const (
	tcpFIN = 0x01
	tcpPSH = 0x08
	tcpCWR = 0x80
)

// Segments is how many segments of at most mss payload bytes a TSO frame
// of frameLen bytes with hdrLen bytes of headers makes (at least 1).
func Segments(frameLen, hdrLen, mss int) int {
	if mss <= 0 || frameLen <= hdrLen {
		return 1
	}
	return (frameLen - hdrLen + mss - 1) / mss
}

// SegmentTCP splits a TSO frame (Ethernet, IPv4 or IPv6 as v6 says, TCP)
// into segments of at most mss payload bytes, written one after another
// into dst, segment k's length in lens[k], and returns how many it made.
// Each segment is a complete frame: the headers of the original, with the
// IP length (and for IPv4 the ID, incremented per segment, and the header
// checksum), the TCP sequence number and the TCP checksum its own. FIN and
// PSH stay only on the last segment, CWR only on the first (as Linux's
// tcp_gso_segment does). The checksum field the sender left partial is
// ignored: every checksum is computed whole.
//
// It fails, with dst possibly written, if the headers are not a TCP frame
// it can split (ErrHeaders), mss is 0 (ErrMSS), or dst or lens cannot hold
// every segment (ErrNoRoom). A segment too long for the IP length field
// is ErrHeaders.
func SegmentTCP(dst []byte, lens []int, frame []byte, v6 bool, mss int) (int, error) {
	if mss <= 0 {
		return 0, ErrMSS
	}
	t, err := parseTCP(frame, v6)
	if err != nil {
		return 0, err
	}
	hdr := t.payload
	payload := len(frame) - hdr
	n := Segments(len(frame), hdr, mss)
	if min(mss, payload)+hdr-t.l3 > 0xffff {
		return 0, ErrHeaders // a segment's IP length would not fit its field
	}
	if n > len(lens) || n*hdr+payload > len(dst) {
		return 0, ErrNoRoom
	}
	seq := binary.BigEndian.Uint32(frame[t.l4+4:])
	flags := frame[t.l4+13]
	var id uint16
	if !t.v6 {
		id = binary.BigEndian.Uint16(frame[t.l3+4:])
	}
	off := 0
	for k := 0; k < n; k++ {
		lo := hdr + k*mss
		hi := min(lo+mss, len(frame))
		seg := dst[off : off+hdr+hi-lo]
		copy(seg, frame[:hdr])
		copy(seg[hdr:], frame[lo:hi])
		f := flags
		if k != n-1 {
			f &^= tcpFIN | tcpPSH
		}
		if k != 0 {
			f &^= tcpCWR
		}
		t.finish(seg, seq+uint32(k*mss), f, id+uint16(k))
		lens[k] = len(seg)
		off += len(seg)
	}
	return n, nil
}

// finish rewrites one segment's per-segment fields and checksums.
func (t *tcpFrame) finish(seg []byte, seq uint32, flags uint8, id uint16) {
	ip := seg[t.l3:]
	if t.v6 {
		binary.BigEndian.PutUint16(ip[4:], uint16(len(seg)-t.l3-ipv6Len))
	} else {
		ihl := t.l4 - t.l3
		binary.BigEndian.PutUint16(ip[2:], uint16(len(seg)-t.l3))
		binary.BigEndian.PutUint16(ip[4:], id)
		binary.BigEndian.PutUint16(ip[10:], 0)
		binary.BigEndian.PutUint16(ip[10:], Checksum(ip[:ihl]))
	}
	tcp := seg[t.l4:]
	binary.BigEndian.PutUint32(tcp[4:], seq)
	tcp[13] = flags
	binary.BigEndian.PutUint16(tcp[16:], 0)
	binary.BigEndian.PutUint16(tcp[16:], ChecksumWith(tcp, t.pseudoSum(seg, len(tcp))))
}
