// Package xsk is xvswitch's AF_XDP layer: a UMEM (frames shared with the
// kernel) with a frame allocator, the four rings (fill, completion, RX, TX)
// mapped from the socket, and sockets bound to one (interface, queue) that
// move frames in bursts without allocating.
//
// It is built directly on golang.org/x/sys/unix rather than on a third-party
// AF_XDP library (see README.md for why). A typical life:
//
//	u, _ := xsk.NewUMEM(xsk.UMEMConfig{NumFrames: 4096})
//	s, _ := u.Bind(ifindex, queue, xsk.SocketConfig{})
//	// put s.FD() in the XDP program's XSKMAP at slot queue
//	n := s.Receive(descs[:])       // up to len(descs) frames, no allocation
//	... s.Frame(descs[i]) ...      // the bytes, inside the UMEM
//	s.Release(descs[:n])           // frames back to the fill ring
//	s.Transmit(frames)             // copy, submit, one kick per burst
//	s.Complete()                   // reap completions
//
// A Socket is owned by one goroutine (one worker per queue): nothing in it is
// locked. Sockets sharing a UMEM each own a disjoint slice of its frames.
package xsk
