package vswitch

import (
	"encoding/binary"
	"sync/atomic"
)

// capRing is one worker's buffer of one capture's frames: a byte ring with
// one producer (the worker) and one consumer (the capture's stream), whose
// positions only grow. The worker copies a burst's frames in and publishes
// them with one store of tail; the stream reads them and frees them with a
// store of head. A frame that does not fit is counted in drops: the worker
// never waits for the stream.
//
// A record is a header of capRecHeader bytes (the frame's time, its
// captured and its wire length, its direction) and the captured bytes,
// padded so the next record starts at a multiple of 16. Records never wrap:
// one that would is put at the start of the ring, behind a skip record.
type capRing struct {
	buf   []byte        // a power of two long, at least 2*capRecHeader
	tail  atomic.Uint64 // the worker's: the end of what it published
	drops atomic.Uint64 // the worker's
	_     [cacheLine]byte
	head  atomic.Uint64 // the stream's: the end of what it read
	_     [cacheLine]byte
}

// cacheLine of padding keeps what the worker writes and what the stream
// writes, and the rings of two workers, off each other's cache lines.
const cacheLine = 64

const (
	capRecHeader = 16
	// capSkip in a record's captured length marks the rest of the ring as
	// empty: the next record is at its start.
	capSkip = ^uint32(0)
	// capOutFlag in a record's wire-length word: the switch handed the
	// frame to the port (else the port received it).
	capOutFlag = 1 << 31
)

// SnapLen is the most bytes of a frame a capture keeps (tcpdump -s); the
// switch's longest frame (a 64 KiB MTU) fits.
const SnapLen = 65535

// put copies the frames of b that in selects (received by the port) and
// then those out selects (handed to it), stamped ts, and publishes them.
func (r *capRing) put(b *Burst, in, out Mask, ts int64) {
	t, h := r.tail.Load(), r.head.Load()
	var dropped uint64
	for m := in; m != 0; m &= m - 1 {
		if !r.add(&t, h, b.Frame(m.Lowest()), ts, 0) {
			dropped++
		}
	}
	for m := out; m != 0; m &= m - 1 {
		if !r.add(&t, h, b.Frame(m.Lowest()), ts, capOutFlag) {
			dropped++
		}
	}
	r.tail.Store(t)
	if dropped > 0 {
		r.drops.Add(dropped)
	}
}

// add writes f's record at *t, unless the ring up to the stream's head h
// has no room for it.
func (r *capRing) add(t *uint64, h uint64, f Frame, ts int64, flags uint32) bool {
	size := uint64(len(r.buf))
	n := min(f.len, SnapLen)
	need := capRecHeader + pad16(uint64(n))
	off := *t & (size - 1)
	var skip uint64
	if off+need > size {
		skip = size - off // at least capRecHeader: records are 16-aligned
	}
	if *t+skip+need-h > size {
		return false
	}
	if skip > 0 {
		binary.LittleEndian.PutUint32(r.buf[off+8:], capSkip)
		*t += skip
		off = 0
	}
	rec := r.buf[off : off+need]
	binary.LittleEndian.PutUint64(rec, uint64(ts))
	binary.LittleEndian.PutUint32(rec[8:], uint32(n))
	binary.LittleEndian.PutUint32(rec[12:], uint32(f.len)|flags)
	f.CopyTo(rec[capRecHeader : capRecHeader+n])
	*t += need
	return true
}

func pad16(n uint64) uint64 { return (n + 15) &^ 15 }

// capRecord is a frame in a ring, as the stream reads it; data is the
// ring's memory, valid until the stream frees it.
type capRecord struct {
	ts      int64
	out     bool
	wireLen int
	data    []byte
}

// peek reads the record at position h, if the worker published one by t,
// and returns the position after it (after a skip record, with ok false,
// when only that was left).
func (r *capRing) peek(h, t uint64) (rec capRecord, next uint64, ok bool) {
	size := uint64(len(r.buf))
	for h < t {
		off := h & (size - 1)
		hd := r.buf[off : off+capRecHeader]
		n := binary.LittleEndian.Uint32(hd[8:])
		if n == capSkip {
			h += size - off
			continue
		}
		wl := binary.LittleEndian.Uint32(hd[12:])
		rec = capRecord{
			ts:      int64(binary.LittleEndian.Uint64(hd)),
			out:     wl&capOutFlag != 0,
			wireLen: int(wl &^ capOutFlag),
			data:    r.buf[off+capRecHeader : off+capRecHeader+uint64(n)],
		}
		return rec, h + capRecHeader + pad16(uint64(n)), true
	}
	return capRecord{}, h, false
}
