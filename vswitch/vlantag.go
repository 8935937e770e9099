package vswitch

import "github.com/xvswitch/xvswitch/virtionet"

// Pushing and popping tags. A frame leaves each output port with the tag
// that port wants (portVLAN.tagged): none, or one of the frame's VLAN.
// Every egress of the switch copies (into a guest's RX buffers, into a
// UMEM frame), so the worker never rewrites a frame in place: it gives
// the output queue another view of the same bytes, a 12- or 16-byte
// prefix of its own (the MACs, then the tag to push, if any) followed by
// the frame's bytes after its own tag (or after its MACs, if it had
// none), and the copy the queue makes anyway moves the tag. A frame to
// several ports (a flood) keeps its own view for the ports that want its
// bytes as they are.
//
// The view is built once per frame and burst, the first time a port
// needs it, and swapped into the burst only around that port's Transmit:
// the frame's own view is what the ingress queue and the next port see.
// A pushed tag makes the frame 4 bytes longer, and Len says so: the
// output queue checks it against the MTU and the buffers it copies into
// (too_long, guest_buffer_too_small), as for any frame. A guest's offload
// metadata (csum_start, hdr_len: virtionet.Offload.Moved) moves with the
// tag, so a partial checksum or a segmentation is done at the right place.

// tagViews is a worker's per-burst state for tags: each frame's VLAN and
// tag as classified at ingress, and the retagged views built so far.
type tagViews struct {
	vid   [MaxBurst]uint16
	cls   Mask // classified (cross-connected frames are not, and keep their bytes)
	tag   Mask // the frame's bytes carry a tag
	exact Mask // ... and that tag's id is the frame's VLAN
	built Mask // alt's frame i is frame i's view after its tag (or MACs)
	alt   virtionet.Frames
	// prefix[i] is frame i's MACs and the tag to push (when wanted).
	prefix [MaxBurst][ethHeaderLen + vlanTagLen - 2]byte
	// segs[i] backs alt's frame i's segments; it grows (an allocation) only
	// for a frame of more segments than any before it on this worker.
	segs [MaxBurst][][]byte
	// off and own are frame i's own offload metadata and length.
	off [MaxBurst]virtionet.Offload
	own [MaxBurst]int
}

// reset forgets the previous burst's views.
func (t *tagViews) reset() { t.cls, t.tag, t.exact, t.built = 0, 0, 0, 0 }

// set records frame i's classification.
func (t *tagViews) set(i int, vid uint16, tag, exact bool) {
	t.vid[i] = vid
	bit := Mask(1) << i
	t.cls |= bit
	if tag {
		t.tag |= bit
	}
	if exact {
		t.exact |= bit
	}
}

// retag swaps into b, for the frames of m, the view out wants where their
// own bytes are not it, and returns the frames it swapped (to swap back
// with the same call after the transmit: swapping is its own inverse).
func (t *tagViews) retag(b *Burst, m Mask, out *portVLAN) Mask {
	var swapped Mask
	for r := m & t.cls; r != 0; r &= r - 1 {
		i := r.Lowest()
		bit := Mask(1) << i
		want := out.tagged(t.vid[i])
		if want && t.exact&bit != 0 || !want && t.tag&bit == 0 {
			continue // its own bytes are right
		}
		if t.built&bit == 0 {
			t.build(b, i)
		}
		segs := t.segs[i]
		body := t.alt.FrameLen(i) - len(segs[0])
		if want {
			segs[0] = t.prefix[i][:ethHeaderLen+vlanTagLen-2]
		} else {
			segs[0] = t.prefix[i][:ethHeaderLen-2]
		}
		n := body + len(segs[0])
		t.alt.Set(i, segs, n)
		// Offload metadata (csum_start, hdr_len) counts from the first
		// byte: it moves with the tag.
		t.alt.SetOffload(i, t.off[i].Moved(n-t.own[i]))
		swapped |= bit
	}
	t.swap(b, swapped)
	return swapped
}

// swap exchanges the frames of m with their retagged views, in the
// burst's table (a guest's TX queue's own, when the burst came from one:
// its frames are its own again once swapped back).
func (t *tagViews) swap(b *Burst, m Mask) {
	for r := m; r != 0; r &= r - 1 {
		b.table().Exchange(r.Lowest(), &t.alt)
	}
}

// build makes alt[i]: frame i's MACs into prefix[i] with the tag of its
// VLAN after them, then the frame's bytes from the end of its own tag, or
// of its MACs if it has none. Frames reach here only classified, so they
// hold at least ethHeaderLen bytes, or ethHeaderLen+vlanTagLen if tagged.
func (t *tagViews) build(b *Burst, i int) {
	f := b.Frame(i)
	p := &t.prefix[i]
	skip := ethHeaderLen - 2
	if t.tag&(1<<i) != 0 {
		skip += vlanTagLen
	}
	// The MACs, gathered across segments if need be.
	got := 0
	for _, s := range f.segs {
		got += copy(p[got:ethHeaderLen-2], s)
		if got == ethHeaderLen-2 {
			break
		}
	}
	p[12], p[13] = tpid8021Q>>8, tpid8021Q&0xff
	p[14], p[15] = byte(t.vid[i]>>8), byte(t.vid[i])
	segs := t.segs[i][:0]
	segs = append(segs, p[:ethHeaderLen-2])
	off := skip
	for _, s := range f.segs {
		if off >= len(s) {
			off -= len(s)
			continue
		}
		segs = append(segs, s[off:])
		off = 0
	}
	t.segs[i] = segs
	t.off[i], t.own[i] = f.off, f.len
	t.alt.Set(i, segs, f.len-skip+ethHeaderLen-2)
	t.alt.SetOffload(i, f.off)
	t.built |= 1 << i
}
