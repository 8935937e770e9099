package vswitch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/xvswitch/xvswitch/ctl"
)

// Capturing a port's frames (`xvswitch capture`): what the port received
// (in), what the switch handed it to send (out), or both. The workers copy
// them, once per burst and without allocating, into rings of the capture's
// own (capring.go); the capture's stream, on the control connection that
// asked for it, sends them to the client.
//
// "out" is what the switch forwarded to the port, taken before the port's
// transmit: frames the port then could not send (no guest buffers, its TX
// ring full, the port down) are in the capture and in `show stats`' drops.
// "in" is every frame the port's queues passed to the switch, including
// those the switch then dropped (spoofed source, hairpin, no destination);
// a chain a guest got wrong never became a frame and is not there.

// ErrTooManyCaptures means MaxCaptures are running.
var ErrTooManyCaptures = errors.New("vswitch: too many captures running")

// ErrBadCapture means a capture request asked for something there is not.
var ErrBadCapture = errors.New("vswitch: bad capture request")

// MaxCaptures bounds the captures running at once, and so the memory they
// hold (CaptureBuffer per worker each).
const MaxCaptures = 8

// CaptureBuffer is the size of each worker's ring of one capture: 1 MiB,
// some 13,000 frames of 64 bytes, filled by the workers and emptied by the
// stream every few milliseconds.
const CaptureBuffer = 1 << 20

// capPoll is how long a capture's stream waits when its rings are empty.
const capPoll = 2 * time.Millisecond

// capDir selects the frames of a capture.
type capDir uint8

const (
	capIn capDir = 1 << iota
	capOut
	capBoth = capIn | capOut
)

func parseCapDir(s string) (capDir, error) {
	switch s {
	case ctl.DirIn:
		return capIn, nil
	case ctl.DirOut:
		return capOut, nil
	case ctl.DirBoth, "":
		return capBoth, nil
	}
	return 0, fmt.Errorf("%w: direction %q: want %s, %s or %s", ErrBadCapture, s, ctl.DirIn, ctl.DirOut, ctl.DirBoth)
}

func (d capDir) String() string {
	switch d {
	case capIn:
		return ctl.DirIn
	case capOut:
		return ctl.DirOut
	}
	return ctl.DirBoth
}

// capture is one running capture of one port.
type capture struct {
	port  *port
	dir   capDir
	start time.Time // ring timestamps are nanoseconds since
	rings []capRing // by worker id
	tails []uint64  // the stream's scratch: each ring's tail as it drains
}

// tapTable is what the workers read of the running captures: immutable,
// replaced as a whole when one starts or stops.
type tapTable struct {
	caps []*capture
}

// captures are a switch's running captures.
type captures struct {
	// table is nil while no capture runs: then a burst pays one load and
	// one branch for captures (forward).
	table atomic.Pointer[tapTable]
	mu    sync.Mutex // changes of table
}

// tap copies this burst's frames into the captures that want them: the
// frames src received for a capture of its "in", each port's share of the
// burst (masks) for one of its "out". It runs before any transmit, reads
// the clock once, and never waits: a full ring counts a drop.
func (w *forwarder) tap(t *tapTable, src *port, ports []*port, masks []Mask, n int) {
	var now time.Time
	for _, c := range t.caps {
		var in, out Mask
		if c.dir&capIn != 0 && c.port == src {
			in = Mask(1)<<n - 1
		}
		if i := c.port.idx; c.dir&capOut != 0 && i < len(ports) && ports[i] == c.port {
			out = masks[i]
		}
		if in|out == 0 {
			continue
		}
		if now.IsZero() {
			now = time.Now()
		}
		c.rings[w.id].put(&w.fb, in, out, int64(now.Sub(c.start)))
	}
}

// startCapture starts capturing the frames of the port called name that
// dir selects, into rings of ringSize bytes (a power of two) per worker.
func (s *Switch) startCapture(name string, dir capDir, ringSize int) (*capture, error) {
	s.mu.Lock()
	p := s.byName[name]
	s.mu.Unlock()
	if p == nil {
		return nil, fmt.Errorf("%w: %q", ErrNoPort, name)
	}
	s.caps.mu.Lock()
	defer s.caps.mu.Unlock()
	var running []*capture
	if t := s.caps.table.Load(); t != nil {
		running = t.caps
	}
	if len(running) >= MaxCaptures {
		return nil, fmt.Errorf("%w (at most %d)", ErrTooManyCaptures, MaxCaptures)
	}
	c := &capture{port: p, dir: dir, start: time.Now(), rings: make([]capRing, len(s.workers)), tails: make([]uint64, len(s.workers))}
	for i := range c.rings {
		c.rings[i].buf = make([]byte, ringSize)
	}
	s.caps.table.Store(&tapTable{caps: append(slices.Clip(running), c)})
	return c, nil
}

// stopCapture takes c out of the workers' table (a worker still in a
// burst with the old one may add a last frame or drop).
func (s *Switch) stopCapture(c *capture) {
	s.caps.mu.Lock()
	defer s.caps.mu.Unlock()
	t := s.caps.table.Load()
	if t == nil {
		return
	}
	left := slices.DeleteFunc(slices.Clone(t.caps), func(x *capture) bool { return x == c })
	if len(left) == 0 {
		s.caps.table.Store(nil)
	} else {
		s.caps.table.Store(&tapTable{caps: left})
	}
}

// onSwitch reports whether p is still one of the switch's ports.
func (s *Switch) onSwitch(p *port) bool {
	ports := s.snap.Load().ports
	return p.idx < len(ports) && ports[p.idx] == p
}

// dropped is how many frames the capture's rings had no room for.
func (c *capture) dropped() uint64 {
	var n uint64
	for i := range c.rings {
		n += c.rings[i].drops.Load()
	}
	return n
}

// drain sends the frames the workers have published, oldest first across
// their rings, at most max of them (0: all), and returns how many.
func (c *capture) drain(cw *ctl.CaptureWriter, max int) (int, error) {
	for i := range c.rings {
		c.tails[i] = c.rings[i].tail.Load()
	}
	sent := 0
	for max == 0 || sent < max {
		best := -1
		var rec capRecord
		var after uint64
		for i := range c.rings {
			r := &c.rings[i]
			h := r.head.Load()
			got, next, ok := r.peek(h, c.tails[i])
			if !ok {
				if next != h {
					r.head.Store(next) // past a skip record
				}
				continue
			}
			if best < 0 || got.ts < rec.ts {
				best, rec, after = i, got, next
			}
		}
		if best < 0 {
			break
		}
		at := c.start.Add(time.Duration(rec.ts)).UnixNano()
		if err := cw.Frame(at, rec.out, rec.wireLen, rec.data); err != nil {
			return sent, err
		}
		// The writer has copied the frame (or sent it): free it.
		c.rings[best].head.Store(after)
		sent++
	}
	return sent, nil
}

// stream sends c's frames on cw until count of them went (0: no limit),
// ctx ends (the client stopped or went away, or the switch is stopping)
// or the port leaves the switch; then it stops the capture, sends what the
// workers published until then, and the end.
func (s *Switch) stream(ctx context.Context, c *capture, count int, cw *ctl.CaptureWriter) error {
	defer s.stopCapture(c)
	var sent int
	var reason string
	idle := time.NewTimer(capPoll)
	defer idle.Stop()
	for reason == "" {
		n, err := c.drain(cw, max(count-sent, 0))
		if err != nil {
			return err
		}
		sent += n
		switch {
		case count > 0 && sent >= count:
			reason = ctl.EndCount
		case ctx.Err() != nil:
			reason = ctl.EndShutdown
			if errors.Is(context.Cause(ctx), ctl.ErrClientStopped) {
				reason = ctl.EndStopped
			}
		case !s.onSwitch(c.port):
			reason = ctl.EndPortRemoved
		case n == 0:
			if err := cw.Flush(); err != nil {
				return err
			}
			idle.Reset(capPoll)
			select {
			case <-ctx.Done():
			case <-idle.C:
			}
		}
	}
	s.stopCapture(c)
	if reason != ctl.EndCount {
		n, err := c.drain(cw, max(count-sent, 0))
		if err != nil {
			return err
		}
		sent += n
	}
	return cw.End(ctl.CaptureEnd{Frames: uint64(sent), Dropped: c.dropped(), Reason: reason})
}

// captureRequest answers OpCapture: the capture starts here, and the
// response's stream sends its frames.
func (s *Switch) captureRequest(req ctl.Request) (ctl.Response, error) {
	dir, err := parseCapDir(req.Direction)
	if err != nil {
		return ctl.Response{}, err
	}
	if req.Count < 0 {
		return ctl.Response{}, fmt.Errorf("%w: count %d: want 0 (no limit) or more", ErrBadCapture, req.Count)
	}
	c, err := s.startCapture(req.Name, dir, CaptureBuffer)
	if err != nil {
		return ctl.Response{}, err
	}
	return ctl.Response{
		Capture: &ctl.CaptureInfo{Port: req.Name, Direction: dir.String(), SnapLen: SnapLen},
		Stream: func(ctx context.Context, w io.Writer) error {
			return s.stream(ctx, c, req.Count, ctl.NewCaptureWriter(w))
		},
	}, nil
}
