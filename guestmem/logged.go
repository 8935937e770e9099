package guestmem

// A Memory carries the dirty log its writers mark while a front-end
// migrates the guest: rings and virtio-net get the log with the table they
// are built over, so turning logging on or off, or replacing the log, is a
// table change like any other (new rings over a new Memory, the old one
// released by the pollers first) and nothing on the data path looks for it
// anywhere else.

// WithLog returns a copy of m whose writes are to be logged in l (nil: not
// logged). m itself is unchanged.
func (m *Memory) WithLog(l *DirtyLog) *Memory {
	c := *m
	c.log = l
	return &c
}

// Log returns the dirty log of m's writes, or nil while nobody migrates
// the guest. Writers check it once when they are built (or once per
// burst) and mark only when it is set.
func (m *Memory) Log() *DirtyLog { return m.log }

// LogWrite marks dirty the guest pages of b, bytes of one of m's regions
// the device has just written. Bytes that are not guest memory are not
// marked. It does not allocate.
func (m *Memory) LogWrite(b []byte) {
	if m.log == nil {
		return
	}
	for i := range m.regions {
		r := &m.regions[i]
		if off, ok := hostOffset(r.Host, b); ok {
			m.log.Mark(r.GuestAddr+off, min(uint64(len(b)), r.Size-off))
			return
		}
	}
}

// LogWritten marks the first n bytes of segs, the writable segments of a
// chain, dirty.
func (m *Memory) LogWritten(segs [][]byte, n int) {
	for _, s := range segs {
		if n <= 0 {
			return
		}
		k := min(len(s), n)
		m.LogWrite(s[:k])
		n -= k
	}
}
