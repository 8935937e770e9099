package split

import "github.com/xvswitch/xvswitch/guestmem"

// While the guest migrates (the ring's memory has a dirty log), every
// guest byte the device writes is marked in the log after it is written:
// the used elements of a Push (logUsed), the used flags and index
// (publishUsed) and, with EVENT_IDX, avail_event (logAvailEvent). Nothing
// else of the guest is written by the ring.

// logUsed marks the n used elements from used index u on (wrapping) dirty.
func (r *Ring) logUsed(u uint16, n int) {
	if uint32(n) >= r.size {
		r.dirty.LogWrite(r.used[4 : 4+8*int(r.size)])
		return
	}
	first := int(u & r.mask)
	end := first + n
	if end <= int(r.size) {
		r.dirty.LogWrite(r.used[4+8*first : 4+8*end])
		return
	}
	r.dirty.LogWrite(r.used[4+8*first : 4+8*int(r.size)])
	r.dirty.LogWrite(r.used[4 : 4+8*(end-int(r.size))])
}

// logAvailEvent marks avail_event, at the used ring's end, dirty.
func (r *Ring) logAvailEvent() {
	if r.dirty != nil {
		off := availEventOff(int(r.size))
		r.dirty.LogWrite(r.used[off : off+2])
	}
}

// LoggedMemory returns the ring's memory while its writes are logged, else
// nil. virtionet marks the receive buffers it writes there.
func (r *Ring) LoggedMemory() *guestmem.Memory { return r.dirty }
