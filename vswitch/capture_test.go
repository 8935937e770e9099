package vswitch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"testing"
	"time"

	"github.com/xvswitch/xvswitch/ctl"
	"github.com/xvswitch/xvswitch/vhost/vhosttest"
)

// serveCtl serves h on a control socket for the test and returns its path.
func serveCtl(t *testing.T, h ctl.Handler) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ctl.sock")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ctl.Serve(ctx, path, h) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	waitFor(t, "the control socket", func() bool {
		_, err := ctl.Call(path, ctl.Request{Op: ctl.OpShowPorts})
		return err == nil
	})
	return path
}

// captured reads a capture stream to its end.
func captured(t *testing.T, s *ctl.CaptureStream) ([]ctl.CaptureFrame, ctl.CaptureEnd) {
	t.Helper()
	var got []ctl.CaptureFrame
	for {
		f, err := s.Next()
		if err == io.EOF {
			return got, s.End()
		}
		if err != nil {
			t.Fatal(err)
		}
		f.Data = append([]byte(nil), f.Data...)
		got = append(got, f)
	}
}

// framesOf is the bytes of fs that went in direction out.
func framesOf(fs []ctl.CaptureFrame, out bool) [][]byte {
	var b [][]byte
	for _, f := range fs {
		if f.Out == out {
			b = append(b, f.Data)
		}
	}
	return b
}

// framesTo is n frames from g to dst, frameTo's #0 to #n-1.
func (g *guest) framesTo(dst uint64, n int) [][]byte {
	var fs [][]byte
	for i := 0; i < n; i++ {
		fs = append(fs, g.frameTo(dst, i))
	}
	return fs
}

func sameFrames(t *testing.T, what string, got, want [][]byte) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d frames, want %d", what, len(got), len(want))
	}
	for i := range want {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("%s: frame %d is\n%q\nwant\n%q", what, i, got[i], want[i])
		}
	}
}

// TestCaptureGuestFrames: three captures of one guest's port over the
// control socket, in, out and both, while it and another guest exchange
// more than a burst each way: each capture has exactly the frames of its
// direction, in the order they were sent, with timestamps in order and
// within the exchange, and nothing dropped. Stopping a capture ends it
// with its count. With two workers, the two directions are two workers'
// bursts, in two rings: "both" merges them, each direction still in order.
func TestCaptureGuestFrames(t *testing.T) {
	for _, workers := range []int{1, 2} {
		t.Run(fmt.Sprintf("workers=%d", workers), func(t *testing.T) { captureGuestFrames(t, workers) })
	}
}

func captureGuestFrames(t *testing.T, workers int) {
	s := startTestSwitch(t, Config{Workers: workers})
	a := addGuest(t, s, "a", 0x0252_5400_0001, vhosttest.Options{Packed: true})
	b := addGuest(t, s, "b", 0x0252_5400_0002, vhosttest.Options{})
	path := serveCtl(t, s.Handle)
	start := time.Now()
	streams := map[string]*ctl.CaptureStream{}
	for _, dir := range []string{ctl.DirIn, ctl.DirOut, ctl.DirBoth} {
		cs, err := ctl.Capture(path, ctl.Request{Name: "a", Direction: dir})
		if err != nil {
			t.Fatal(err)
		}
		defer cs.Close()
		if cs.Info != (ctl.CaptureInfo{Port: "a", Direction: dir, SnapLen: SnapLen}) {
			t.Errorf("capture %s: %+v", dir, cs.Info)
		}
		streams[dir] = cs
	}
	const n = 40
	a.fe.PostRx(0, n)
	b.fe.PostRx(0, n)
	toB, toA := a.framesTo(b.mac, n), b.framesTo(a.mac, n)
	// Interleaved, so that "both" sees the two directions mixed.
	for i := 0; i < n; i += 10 {
		a.fe.Send(0, toB[i:i+10]...)
		b.fe.Send(0, toA[i:i+10]...)
	}
	b.receive(t, 0, n)
	a.receive(t, 0, n)
	end := time.Now()
	for dir, cs := range streams {
		if err := cs.Stop(); err != nil {
			t.Fatal(err)
		}
		got, e := captured(t, cs)
		want := map[string]int{ctl.DirIn: n, ctl.DirOut: n, ctl.DirBoth: 2 * n}[dir]
		if e != (ctl.CaptureEnd{Frames: uint64(want), Reason: ctl.EndStopped}) {
			t.Errorf("capture %s ended %+v, want %d frames, stopped", dir, e, want)
		}
		if dir != ctl.DirOut {
			sameFrames(t, dir+" received", framesOf(got, false), toB)
		}
		if dir != ctl.DirIn {
			sameFrames(t, dir+" sent", framesOf(got, true), toA)
		}
		// One worker: one ring, every frame in the order it passed. Two: a
		// frame one worker published late may come after a later one of the
		// other's; each direction, one worker's, stays in order.
		last := map[bool]time.Time{false: start, true: start}
		for i, f := range got {
			dirOf := f.Out && workers > 1
			if f.Time.Before(last[dirOf]) || f.Time.After(end) || f.WireLen != len(f.Data) {
				t.Fatalf("capture %s: frame %d at %v (after %v, exchange %v to %v), %d of %d bytes", dir, i, f.Time, last[dirOf], start, end, len(f.Data), f.WireLen)
			}
			last[dirOf] = f.Time
		}
	}
	waitFor(t, "the captures to stop", func() bool { return s.caps.table.Load() == nil })
}

// TestCaptureEnds: a capture with a count ends after that many frames; one
// whose port is removed ends saying so; one whose client goes away stops
// copying; and a request for a port or direction there is not is refused.
func TestCaptureEnds(t *testing.T) {
	s := startTestSwitch(t, Config{Workers: 1})
	a := addGuest(t, s, "a", 0x0252_5400_0001, vhosttest.Options{Packed: true})
	b := addGuest(t, s, "b", 0x0252_5400_0002, vhosttest.Options{})
	path := serveCtl(t, s.Handle)
	for _, req := range []ctl.Request{{Name: "nope"}, {Name: "a", Direction: "sideways"}, {Name: "a", Count: -1}} {
		if _, err := ctl.Capture(path, req); err == nil {
			t.Errorf("capture %+v started", req)
		}
	}

	counted, err := ctl.Capture(path, ctl.Request{Name: "a", Direction: ctl.DirIn, Count: 5})
	if err != nil {
		t.Fatal(err)
	}
	defer counted.Close()
	b.fe.PostRx(0, 10)
	toB := a.framesTo(b.mac, 10)
	a.fe.Send(0, toB...)
	got, e := captured(t, counted)
	sameFrames(t, "counted", framesOf(got, false), toB[:5])
	if e != (ctl.CaptureEnd{Frames: 5, Reason: ctl.EndCount}) {
		t.Errorf("counted capture ended %+v", e)
	}

	gone, err := ctl.Capture(path, ctl.Request{Name: "a"})
	if err != nil {
		t.Fatal(err)
	}
	gone.Close()
	waitFor(t, "the capture of a client that went away to stop", func() bool { return s.caps.table.Load() == nil })

	removed, err := ctl.Capture(path, ctl.Request{Name: "b"})
	if err != nil {
		t.Fatal(err)
	}
	defer removed.Close()
	if err := s.DelPort("b"); err != nil {
		t.Fatal(err)
	}
	if _, e := captured(t, removed); e.Reason != ctl.EndPortRemoved {
		t.Errorf("capture of a removed port ended %+v", e)
	}
	waitFor(t, "no capture left", func() bool { return s.caps.table.Load() == nil })
}

// TestCaptureFullBufferDrops: a capture whose ring nobody empties keeps
// the first frames that fit and counts the rest as dropped, while the
// switch forwards every frame; its stream then sends those it kept and
// reports the drops in its end.
func TestCaptureFullBufferDrops(t *testing.T) {
	s := startTestSwitch(t, Config{Workers: 1})
	a := addGuest(t, s, "a", 0x0252_5400_0001, vhosttest.Options{Packed: true})
	b := addGuest(t, s, "b", 0x0252_5400_0002, vhosttest.Options{})
	c, err := s.startCapture("a", capIn, 4096)
	if err != nil {
		t.Fatal(err)
	}
	const n = 100
	b.fe.PostRx(0, n)
	toB := a.framesTo(b.mac, n)
	for i := 0; i < n; i += 25 {
		a.fe.Send(0, toB[i:i+25]...)
	}
	sameFrames(t, "b", b.receive(t, 0, n), toB)
	// Each frame takes a 16-byte header and its bytes padded to 16.
	fit := 4096 / (capRecHeader + int(pad16(uint64(len(toB[0])))))
	if d := c.dropped(); d < n-uint64(fit) || d == n {
		t.Fatalf("%d of %d frames dropped; %d fit", d, n, fit)
	}
	path := serveCtl(t, func(req ctl.Request) ctl.Response {
		if req.Op != ctl.OpCapture {
			return ctl.Response{}
		}
		return ctl.Response{Capture: &ctl.CaptureInfo{}, Stream: func(ctx context.Context, w io.Writer) error {
			return s.stream(ctx, c, 0, ctl.NewCaptureWriter(w))
		}}
	})
	cs, err := ctl.Capture(path, ctl.Request{})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	cs.Stop()
	got, e := captured(t, cs)
	sameFrames(t, "kept", framesOf(got, false), toB[:len(got)])
	if e.Frames != uint64(len(got)) || e.Frames+e.Dropped != n || e.Reason != ctl.EndStopped {
		t.Errorf("end %+v after %d frames", e, len(got))
	}
	if s.caps.table.Load() != nil {
		t.Errorf("the capture still runs after its stream ended")
	}
}

// TestCaptureNoAllocs: with captures of both ports running, a burst is
// forwarded and copied into them without an allocation, whether their
// rings have room or are full.
func TestCaptureNoAllocs(t *testing.T) {
	r := newBurstRig(t)
	ca, err := r.s.startCapture("a", capBoth, CaptureBuffer)
	if err != nil {
		t.Fatal(err)
	}
	cb, err := r.s.startCapture("b", capOut, CaptureBuffer)
	if err != nil {
		t.Fatal(err)
	}
	if n := r.allocsPerBurst(t, 400); n != 0 {
		t.Fatalf("%v allocations per burst while capturing", n)
	}
	for _, c := range []*capture{ca, cb} {
		if kept := c.rings[0].tail.Load() / (capRecHeader + pad16(uint64(len(r.frames[0])))); kept == 0 || c.dropped() == 0 {
			t.Errorf("capture of %s: %d frames kept, %d dropped: want both", c.port.name, kept, c.dropped())
		}
	}
}

// BenchmarkForwardBurst32Capture is BenchmarkForwardBurst32 with a capture
// of the ingress port's both directions, emptied as fast as it fills.
func BenchmarkForwardBurst32Capture(b *testing.B) {
	r := newBurstRig(b)
	c, err := r.s.startCapture("a", capBoth, CaptureBuffer)
	if err != nil {
		b.Fatal(err)
	}
	ring := &c.rings[0]
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r.burst()
		ring.head.Store(ring.tail.Load())
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*MaxBurst), "ns/frame")
	if c.dropped() != 0 {
		b.Fatalf("%d frames dropped", c.dropped())
	}
}

// TestCaptureLimit: at most MaxCaptures run at once.
func TestCaptureLimit(t *testing.T) {
	r := newBurstRig(t)
	for i := 0; i < MaxCaptures; i++ {
		if _, err := r.s.startCapture("a", capIn, 4096); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := r.s.startCapture("a", capIn, 4096); !errors.Is(err, ErrTooManyCaptures) {
		t.Fatalf("capture %d: %v", MaxCaptures+1, err)
	}
}
