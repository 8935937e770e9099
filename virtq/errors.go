package virtq

import "errors"

// Errors a ring returns when the driver (the guest) breaks the virtio
// contract. Each one is fatal for that ring: it stays broken (every later
// call returns ErrBroken) and the device owning it should be marked broken.
// They are wrapped with context (queue, index, address) by the ring kinds.
var (
	ErrBroken          = errors.New("virtq: ring is broken")
	ErrLoop            = errors.New("virtq: descriptor chain loops")
	ErrChainTooLong    = errors.New("virtq: descriptor chain longer than the ring or the device limit")
	ErrNestedIndirect  = errors.New("virtq: indirect descriptor inside an indirect table")
	ErrBadIndirect     = errors.New("virtq: malformed indirect descriptor")
	ErrBadLength       = errors.New("virtq: zero or oversized descriptor length")
	ErrBadAddress      = errors.New("virtq: descriptor address outside guest memory")
	ErrBadID           = errors.New("virtq: buffer id out of range or already in flight")
	ErrBadIndex        = errors.New("virtq: driver index moved by more than the ring size")
	ErrWriteBeforeRead = errors.New("virtq: readable descriptor after a writable one")
	ErrBadConfig       = errors.New("virtq: bad ring configuration")
	ErrUsedNotInFlight = errors.New("virtq: used entry for a buffer not in flight")
)
