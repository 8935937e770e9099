package virtionet

import (
	"github.com/xvswitch/xvswitch/guestmem"
	"github.com/xvswitch/xvswitch/virtq"
)

// While the guest migrates, the receive buffers a frame is copied into are
// marked in the dirty log after the copy (placeOne, placeMerged); the
// rings mark their own used entries. The log comes with the ring the queue
// is bound to: a ring built over a logged memory table says so
// (loggedRing), and the queue checks once per bind, then once per frame
// written through a field already in cache.

// loggedRing is implemented by rings that can carry a dirty log (packed
// and split); a ring that does not is never logged.
type loggedRing interface {
	LoggedMemory() *guestmem.Memory
}

// loggedMemory returns the memory ring's writes are logged in, or nil.
func loggedMemory(ring virtq.Ring) *guestmem.Memory {
	if lr, ok := ring.(loggedRing); ok {
		return lr.LoggedMemory()
	}
	return nil
}
