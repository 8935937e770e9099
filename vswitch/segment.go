package vswitch

import (
	"github.com/xvswitch/xvswitch/offload"
	"github.com/xvswitch/xvswitch/virtionet"
)

// Software offloads at egress. A guest that negotiated VIRTIO_NET_F_CSUM
// and HOST_TSO sends frames with a partial checksum and TSO frames of up
// to 64 KiB (their metadata rides in Frame.off). An egress that cannot
// take such a frame as it is, a NIC (AF_XDP has no TSO or checksum
// offload the switch may use on these frames) or a guest that did not
// negotiate GUEST_CSUM or GUEST_TSO, gets it finished here: copied out of
// the sender's memory (never written there: the sender is hostile and the
// frame may be flooded to others), its checksum completed or the frame
// segmented, and the results sent through the queue's own path as plain
// frames. Frames are kept in order: plain frames before a finished one go
// out first.
//
// Counting: a TSO frame of one copy becomes k segments, each sent or
// dropped at the queue; the k-1 extra are the queue's segment_copies, so
// that across the switch rx + flood_copies + segment_copies = tx + drops.

// maxSegments bounds the segments of one TSO frame: 64 KiB at an MSS of
// 256. A guest asking for smaller segments of a large frame gets it
// dropped (bad_gso_size) rather than a worker held up making thousands.
const maxSegments = 256

// maxHeaders is the most header bytes a segment repeats: Ethernet, a VLAN
// tag, IPv4 with options (or IPv6) and TCP with options.
const maxHeaders = 14 + 4 + 60 + 60

// finishedLen sizes the buffer of finished frames: a whole TSO frame's
// segments fit, so one never waits on another.
const finishedLen = virtionet.MaxGSOFrameLen + maxSegments*maxHeaders

// asIsSender sends frames as they are, their metadata (if any) accepted by
// the receiver: the egress queue's own transmit (an interface, so that
// handing it over allocates nothing).
type asIsSender interface {
	sendAsIs(b *Burst, m Mask, c *Counts)
}

// finisher is an egress queue's scratch for software offloads, allocated
// the first time the queue meets a frame to finish (most never do).
type finisher struct {
	gathered []byte // a TSO frame gathered from the sender's segments
	out      []byte // finished frames, one after another
	lens     [maxSegments]int
	n, used  int // frames in out, bytes of out they take
	burst    Burst
}

// transmitFinishing sends the frames of m through s, finishing first
// those whose metadata the receiver does not accept (the queue's *fs is
// its scratch, made here when first needed). With no such frame (every
// NIC and every guest without offloads sees only these) it is one pass
// over the mask and one call of s.
func transmitFinishing(fs **finisher, b *Burst, m Mask, c *Counts, accepts virtionet.Offloads, s asIsSender) {
	fr := b.table()
	if fr.Plain() {
		// No frame carries offload metadata: all go as they are,
		// without a look at each.
		s.sendAsIs(b, m, c)
		return
	}
	var plain Mask
	for rest := m; rest != 0; rest &= rest - 1 {
		i := rest.Lowest()
		// Only the offload is read here: the rest of the frame's
		// description stays in its table until a transmit reads it.
		if o := fr.Offload(i); o.IsZero() || accepts.Accepts(o) {
			plain |= 1 << i
			continue
		}
		if *fs == nil {
			*fs = &finisher{gathered: make([]byte, virtionet.MaxGSOFrameLen), out: make([]byte, finishedLen)}
		}
		if plain != 0 {
			s.sendAsIs(b, plain, c)
			plain = 0
		}
		(*fs).add(b.Frame(i), c, s)
	}
	if *fs != nil && (*fs).n > 0 {
		(*fs).flush(c, s)
	}
	if plain != 0 {
		s.sendAsIs(b, plain, c)
	}
}

// add finishes frame f into out, first sending what out holds if f might
// not fit. A frame that cannot be finished is a drop with its reason.
func (fs *finisher) add(f Frame, c *Counts, s asIsSender) {
	if f.len > len(fs.gathered) {
		c.Drop(DropGSOTooLong) // virtionet bounds GSO frames: not reached
		return
	}
	if fs.used+f.len+maxSegments*maxHeaders > len(fs.out) || fs.n == len(fs.lens) {
		fs.flush(c, s)
	}
	o := f.off
	if !o.GSO() {
		dst := fs.out[fs.used : fs.used+f.len]
		f.CopyTo(dst)
		if offload.CompletePartial(dst, int(o.CsumStart()), int(o.CsumOffset())) != nil {
			c.Drop(DropBadCsumOffset) // virtionet checked it: not reached
			return
		}
		fs.push(f.len)
		return
	}
	f.CopyTo(fs.gathered)
	k, err := offload.SegmentTCP(fs.out[fs.used:], fs.lens[fs.n:], fs.gathered[:f.len],
		o.GSOType() == virtionet.GSOTCPv6, int(o.GSOSize()))
	switch err {
	case nil:
	case offload.ErrNoRoom:
		c.Drop(DropBadGSOSize) // more than maxSegments segments
		return
	default:
		c.Drop(DropBadGSOHeaders)
		return
	}
	for j := 0; j < k; j++ {
		fs.used += fs.lens[fs.n]
		fs.n++
	}
	c.segmentCopies += uint64(k - 1)
}

// push records a finished frame of n bytes at the end of out.
func (fs *finisher) push(n int) {
	fs.lens[fs.n] = n
	fs.n++
	fs.used += n
}

// flush sends the finished frames, a burst at a time, and empties out.
func (fs *finisher) flush(c *Counts, s asIsSender) {
	off := 0
	for i := 0; i < fs.n; {
		k := min(fs.n-i, MaxBurst)
		for j := 0; j < k; j++ {
			l := fs.lens[i+j]
			fs.burst.SetOne(j, fs.out[off:off+l])
			off += l
		}
		s.sendAsIs(&fs.burst, Mask(uint64(1)<<k-1), c)
		i += k
	}
	fs.n, fs.used = 0, 0
}
