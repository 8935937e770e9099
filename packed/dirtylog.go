package packed

import "github.com/xvswitch/xvswitch/guestmem"

// While the guest migrates (the ring's memory has a dirty log), every
// guest byte the device writes is marked in the log after it is written:
// the used descriptors of a Push and the slots they cover (logSlots), and
// the device event suppression area (setKicks). Nothing else of the guest
// is written by the ring.

// logSlots marks the n descriptor slots from idx on (wrapping) dirty.
func (r *Ring) logSlots(idx uint16, n uint32) {
	size := uint32(r.size)
	if n >= size {
		r.dirty.LogWrite(r.desc)
		return
	}
	end := uint32(idx) + n
	if end <= size {
		r.dirty.LogWrite(r.desc[int(idx)*descSize : int(end)*descSize])
		return
	}
	r.dirty.LogWrite(r.desc[int(idx)*descSize:])
	r.dirty.LogWrite(r.desc[:int(end-size)*descSize])
}

// LoggedMemory returns the ring's memory while its writes are logged, else
// nil. virtionet marks the receive buffers it writes there.
func (r *Ring) LoggedMemory() *guestmem.Memory { return r.dirty }
