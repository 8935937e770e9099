package ctl

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"
)

// captureHandler answers a capture request with frames, then waits for
// the stream's end and says why it came, as the daemon does.
func captureHandler(frames []CaptureFrame, causes chan<- error) Handler {
	return func(req Request) Response {
		if req.Name != "vm1" {
			return Response{Error: "no such port: " + req.Name}
		}
		return Response{Capture: &CaptureInfo{Port: req.Name, Direction: req.Direction, SnapLen: 64}, Stream: func(ctx context.Context, w io.Writer) error {
			cw := NewCaptureWriter(w)
			for _, f := range frames {
				if err := cw.Frame(f.Time.UnixNano(), f.Out, f.WireLen, f.Data); err != nil {
					return err
				}
			}
			if err := cw.Flush(); err != nil {
				return err
			}
			<-ctx.Done()
			causes <- context.Cause(ctx)
			reason := EndShutdown
			if errors.Is(context.Cause(ctx), ErrClientStopped) {
				reason = EndStopped
			}
			return cw.End(CaptureEnd{Frames: uint64(len(frames)), Dropped: 2, Reason: reason})
		}}
	}
}

var testFrames = []CaptureFrame{
	{Time: time.Unix(1700000000, 123456789), WireLen: 5, Data: []byte("hello")},
	{Time: time.Unix(1700000001, 1), Out: true, WireLen: 1500, Data: []byte("cut at the snapshot length")},
}

// TestCaptureStreamStops: the frames arrive as sent, the client's Stop
// ends the daemon's stream with ErrClientStopped, and the end record
// follows the frames.
func TestCaptureStreamStops(t *testing.T) {
	causes := make(chan error, 1)
	path, _ := serve(t, captureHandler(testFrames, causes))
	if _, err := Capture(path, Request{Name: "nope"}); err == nil || err.Error() != "no such port: nope" {
		t.Fatalf("capture of a missing port: %v", err)
	}
	s, err := Capture(path, Request{Name: "vm1", Direction: DirOut})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Info != (CaptureInfo{Port: "vm1", Direction: DirOut, SnapLen: 64}) {
		t.Errorf("info %+v", s.Info)
	}
	for i, want := range testFrames {
		got, err := s.Next()
		if err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		if !got.Time.Equal(want.Time) || got.Out != want.Out || got.WireLen != want.WireLen || !bytes.Equal(got.Data, want.Data) {
			t.Errorf("frame %d: %+v, want %+v", i, got, want)
		}
	}
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Next(); err != io.EOF {
		t.Fatalf("after the end: %v", err)
	}
	if e := s.End(); e != (CaptureEnd{Frames: 2, Dropped: 2, Reason: EndStopped}) {
		t.Errorf("end %+v", e)
	}
	if c := <-causes; !errors.Is(c, ErrClientStopped) {
		t.Errorf("the stream's context ended with %v", c)
	}
}

// TestCaptureStreamShutdown: a server that stops ends its streams (not
// with ErrClientStopped) and waits for their end records.
func TestCaptureStreamShutdown(t *testing.T) {
	causes := make(chan error, 1)
	path, cancel := serve(t, captureHandler(nil, causes))
	s, err := Capture(path, Request{Name: "vm1"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	cancel()
	if _, err := s.Next(); err != io.EOF || s.End().Reason != EndShutdown {
		t.Fatalf("stream of a stopping server: %v, end %+v", err, s.End())
	}
	if c := <-causes; c == nil || errors.Is(c, ErrClientStopped) {
		t.Errorf("the stream's context ended with %v", c)
	}
}

// TestCaptureStreamCut: a stream that ends without its end record is an
// error, not a quiet end.
func TestCaptureStreamCut(t *testing.T) {
	path, _ := serve(t, func(Request) Response {
		return Response{Capture: &CaptureInfo{}, Stream: func(ctx context.Context, w io.Writer) error {
			cw := NewCaptureWriter(w)
			cw.Frame(1, false, 3, []byte("abc"))
			return cw.Flush()
		}}
	})
	s, err := Capture(path, Request{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if f, err := s.Next(); err != nil || string(f.Data) != "abc" {
		t.Fatalf("first frame: %+v %v", f, err)
	}
	if _, err := s.Next(); err == nil || !errors.Is(err, io.ErrUnexpectedEOF) || !strings.Contains(err.Error(), "without its summary") {
		t.Fatalf("a cut stream: %v", err)
	}
}
