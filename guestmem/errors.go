package guestmem

import "errors"

var (
	// ErrOutOfBounds means an address or length a guest gave lies outside
	// every region of its memory table.
	ErrOutOfBounds = errors.New("guestmem: address outside guest memory")
	// ErrMisaligned means a ring address lacks the alignment the virtio
	// spec requires for it.
	ErrMisaligned = errors.New("guestmem: misaligned ring address")
	// ErrBadTable means a memory table is unusable: overlapping regions,
	// a region whose mapping is shorter than its size, or too many regions.
	ErrBadTable = errors.New("guestmem: bad memory table")
	// ErrTooManySegments means a buffer needed more segments than the
	// caller's array had room for.
	ErrTooManySegments = errors.New("guestmem: buffer needs too many segments")
)
