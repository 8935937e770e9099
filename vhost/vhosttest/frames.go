package vhosttest

import "github.com/xvswitch/xvswitch/virtionet"

// Frames go through the rings the way a virtio-net driver sends and
// receives them: each after a virtio-net header, in buffers from the
// guest's pool (Options.BufSize each).

// Send puts frames on queue pair p's TX ring, each behind a zeroed
// virtio-net header (a frame longer than one buffer takes a chain of
// them), and kicks the ring once. If the ring is full it first takes back
// what the device has completed, as a driver's transmit does; it returns
// how many frames it made available, fewer than given when the ring stays
// full.
func (f *FrontEnd) Send(p int, frames ...[]byte) int {
	f.t.Helper()
	return f.SendWithHeader(p, virtionet.Header{}, frames...)
}

// SendWithHeader is Send with header h (num_buffers aside) in front of
// every frame: a guest's offload requests (NEEDS_CSUM, GSO).
func (f *FrontEnd) SendWithHeader(p int, h virtionet.Header, frames ...[]byte) int {
	f.t.Helper()
	r := f.TxRing(p)
	sent := 0
	for _, fr := range frames {
		if !f.sendOne(r, h, fr) {
			if _, err := r.Reap(); err != nil {
				f.t.Fatalf("queue pair %d TX: %v", p, err)
			}
			if !f.sendOne(r, h, fr) {
				break
			}
		}
		sent++
	}
	if sent > 0 {
		f.Kick(2*p + 1)
	}
	return sent
}

// sendOne makes one frame available, or reports that the ring is full.
func (f *FrontEnd) sendOne(r *Ring, h virtionet.Header, fr []byte) bool {
	f.t.Helper()
	g := f.guestAlive()
	msg := make([]byte, virtionet.HeaderLen+len(fr))
	h.NumBuffers = 0
	h.Encode(msg)
	copy(msg[virtionet.HeaderLen:], fr)
	var bufs []Buf
	var gpas []uint64
	for off := 0; off < len(msg); off += g.bufSize {
		n := min(g.bufSize, len(msg)-off)
		gpa := g.alloc()
		copy(g.mem.Bytes(gpa, uint64(n)), msg[off:off+n])
		bufs = append(bufs, Buf{Addr: gpa, Len: uint32(n)})
		gpas = append(gpas, gpa)
	}
	id, err := r.Add(bufs...)
	if err != nil {
		g.release(gpas)
		return false
	}
	r.owned[id] = gpas
	return true
}

// PostRx makes n empty receive buffers available on queue pair p's RX
// ring, without a kick (the device polls). Receive takes them back as the
// device fills them; nothing posts more on its own, so how many the device
// may fill is the test's choice.
func (f *FrontEnd) PostRx(p, n int) {
	f.t.Helper()
	g := f.guestAlive()
	r := f.RxRing(p)
	for i := 0; i < n; i++ {
		gpa := g.alloc()
		id, err := r.Add(Buf{Addr: gpa, Len: uint32(g.bufSize), Write: true})
		if err != nil {
			f.t.Fatalf("queue pair %d RX: posting buffer %d of %d: %v", p, i+1, n, err)
		}
		r.owned[id] = []uint64{gpa}
	}
}

// Received is one frame the device delivered into the guest.
type Received struct {
	Frame []byte // the bytes after the virtio-net header (a copy)
	// NumBuffers is the header's num_buffers: how many RX buffers the
	// frame spans (1 without MRG_RXBUF).
	NumBuffers uint16
	// Header is the frame's whole virtio-net header (its offload fields:
	// a partial checksum, a GSO frame).
	Header virtionet.Header
	// Len is the bytes the device wrote, header included, over all the
	// frame's buffers.
	Len int
}

// numBuffersOff is where num_buffers sits in the virtio-net header: its
// last field, after flags, gso_type, hdr_len, gso_size, csum_start and
// csum_offset.
const numBuffersOff = 10

// partialRx is a frame whose first buffers have completed and whose
// other NumBuffers have not yet.
type partialRx struct {
	rx   Received
	left int
}

// EmptyRx is how many of queue pair p's RX buffers came back used with
// length 0 (no frame) so far.
func (f *FrontEnd) EmptyRx(p int) int { return f.RxRing(p).empty }

// Receive reaps queue pair p's RX ring and returns the frames completed so
// far, joining the buffers of a merged frame (MRG_RXBUF), and takes the
// buffers back. It does not wait: poll it (WaitFor) for frames the device
// delivers asynchronously. Every RX buffer must be PostRx's; a test that
// adds its own reaps them with Ring.Reap.
func (f *FrontEnd) Receive(p int) []Received {
	f.t.Helper()
	g := f.guestAlive()
	r := f.RxRing(p)
	cs, bufs, err := r.reap()
	if err != nil {
		f.t.Fatalf("queue pair %d RX: %v", p, err)
	}
	var out []Received
	for i, c := range cs {
		if len(bufs[i]) != 1 {
			f.t.Fatalf("queue pair %d RX: completion of id %d, not a buffer PostRx posted", p, c.ID)
		}
		b := append([]byte(nil), g.mem.Bytes(bufs[i][0], uint64(c.Len))...)
		g.release(bufs[i])
		if r.partial == nil && len(b) == 0 {
			// An empty receive: a device giving a buffer back unused (as
			// the zero-copy path does after its socket closed). Linux
			// recycles such a buffer; so does this front-end (EmptyRx).
			r.empty++
			continue
		}
		if r.partial == nil {
			if len(b) < virtionet.HeaderLen {
				f.t.Fatalf("queue pair %d RX: %d bytes, shorter than the header", p, len(b))
			}
			nb := le.Uint16(b[numBuffersOff:])
			if nb > r.Config().Size {
				f.t.Fatalf("queue pair %d RX: num_buffers %d on a ring of %d", p, nb, r.Config().Size)
			}
			r.partial = &partialRx{rx: Received{NumBuffers: nb, Header: virtionet.DecodeHeader(b[:virtionet.HeaderLen])},
				left: max(int(nb), 1)}
			b = b[virtionet.HeaderLen:]
			r.partial.rx.Len = virtionet.HeaderLen
		}
		pr := r.partial
		pr.rx.Frame = append(pr.rx.Frame, b...)
		pr.rx.Len += len(b)
		if pr.left--; pr.left == 0 {
			out = append(out, pr.rx)
			r.partial = nil
		}
	}
	return out
}

// guestAlive returns the guest memory, failing the test if there is none
// the front-end may touch.
func (f *FrontEnd) guestAlive() *guest {
	f.t.Helper()
	switch {
	case f.g == nil:
		f.t.Fatal("vhosttest: no guest memory (Start or NewMemory first)")
	case f.g.dead != nil:
		f.t.Fatalf("vhosttest: %v", f.g.dead)
	}
	return f.g
}
