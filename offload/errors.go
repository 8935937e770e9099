package offload

import "errors"

// Errors say why a frame could not be finished. They are values, so that
// returning one allocates nothing.
var (
	// ErrChecksumOutside: the checksum field is not inside the frame.
	ErrChecksumOutside = errors.New("offload: checksum field outside the frame")
	// ErrHeaders: the frame's Ethernet, IP or TCP headers are not a TCP
	// segment this package can split (truncated, an IP length that
	// disagrees with the frame, IPv4 options past the header, an IPv6
	// extension header, a fragment, not TCP).
	ErrHeaders = errors.New("offload: headers not a segmentable TCP frame")
	// ErrMSS: the segment size is 0.
	ErrMSS = errors.New("offload: segment size 0")
	// ErrNoRoom: the caller's buffers cannot hold every segment.
	ErrNoRoom = errors.New("offload: segments do not fit the buffers given")
)
