package ctl

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"time"
)

// The capture stream. A capture request (OpCapture) is answered with a
// Response line as any other; when it carries Capture, records follow on
// the same connection, each a header of captureHeaderLen bytes and a body:
//
//	byte 0       kind: 'F' a frame, 'E' the end of the capture
//	byte 1       a frame's direction: 'i' the port received it, 'o' the
//	             switch handed it to the port
//	bytes 2-3    zero
//	bytes 4-7    a frame's length on the wire (big-endian; 0 for the end)
//	bytes 8-11   the body's length: the bytes of the frame captured (at most
//	             CaptureInfo.SnapLen), or of the end's JSON
//	bytes 12-19  a frame's time: Unix nanoseconds (big-endian)
//
// The end's body is a CaptureEnd in JSON, and the daemon closes the
// connection after it. The client ends a capture early by closing its
// side of the connection for writing (CaptureStream.Stop); the daemon then
// sends the frames it still holds, and the end.

// The directions of a capture (Request.Direction).
const (
	DirIn   = "in"   // frames the port received
	DirOut  = "out"  // frames the switch handed to the port to send
	DirBoth = "both" // both, in the order they passed
)

// Stream writes what follows a response on its connection until ctx ends
// (the client stopped or went away, or the server is stopping; see
// StreamStopped). Writes that the client does not take within ioTimeout
// fail.
type Stream func(ctx context.Context, w io.Writer) error

// ErrClientStopped is the cause (context.Cause) of a stream's context
// ending because the client closed its side of the connection.
var ErrClientStopped = errors.New("ctl: the client stopped the stream")

// CaptureInfo is what the daemon says a capture request started.
type CaptureInfo struct {
	Port      string `json:"port"`
	Direction string `json:"direction"`
	// SnapLen is the most bytes of a frame the capture keeps; a longer
	// frame's record has its first SnapLen bytes and its wire length.
	SnapLen int `json:"snaplen"`
}

// CaptureEnd is the last record of a capture stream.
type CaptureEnd struct {
	Frames uint64 `json:"frames"` // frames sent on the stream
	// Dropped counts frames the capture did not keep because its buffer
	// was full: the switch never waits for a capture.
	Dropped uint64 `json:"dropped"`
	Reason  string `json:"reason"` // one of the End constants
}

// Why a capture ended (CaptureEnd.Reason).
const (
	EndCount       = "count"        // Request.Count frames were sent
	EndStopped     = "stopped"      // the client stopped it
	EndPortRemoved = "port removed" // the port left the switch
	EndShutdown    = "shutdown"     // the daemon is stopping
)

// CaptureFrame is one captured frame as the client reads it.
type CaptureFrame struct {
	Time    time.Time
	Out     bool   // handed to the port (else received by it)
	WireLen int    // the frame's length; len(Data) is less if it was cut at SnapLen
	Data    []byte // valid until the next call of Next
}

const (
	captureHeaderLen = 20
	recordFrame      = 'F'
	recordEnd        = 'E'
	// maxRecord bounds the body a client accepts: a frame of at most
	// 64 KiB (SnapLen), or the end's JSON.
	maxRecord = 1 << 20
)

// CaptureWriter writes a capture stream's records, buffered.
type CaptureWriter struct {
	w   *bufio.Writer
	hdr [captureHeaderLen]byte
}

// NewCaptureWriter writes records to w.
func NewCaptureWriter(w io.Writer) *CaptureWriter {
	return &CaptureWriter{w: bufio.NewWriterSize(w, 64<<10)}
}

// Frame writes one frame record: data is the frame's first bytes (all of
// them, or SnapLen), wireLen its length, at is Unix nanoseconds.
func (c *CaptureWriter) Frame(at int64, out bool, wireLen int, data []byte) error {
	dir := byte('i')
	if out {
		dir = 'o'
	}
	c.header(recordFrame, dir, wireLen, len(data), at)
	if _, err := c.w.Write(c.hdr[:]); err != nil {
		return err
	}
	_, err := c.w.Write(data)
	return err
}

// End writes the end record and flushes.
func (c *CaptureWriter) End(e CaptureEnd) error {
	body, err := json.Marshal(e)
	if err != nil {
		return err
	}
	c.header(recordEnd, 0, 0, len(body), 0)
	if _, err := c.w.Write(c.hdr[:]); err != nil {
		return err
	}
	if _, err := c.w.Write(body); err != nil {
		return err
	}
	return c.w.Flush()
}

// Flush sends what is buffered.
func (c *CaptureWriter) Flush() error { return c.w.Flush() }

func (c *CaptureWriter) header(kind, dir byte, wireLen, n int, at int64) {
	h := c.hdr[:]
	h[0], h[1], h[2], h[3] = kind, dir, 0, 0
	binary.BigEndian.PutUint32(h[4:], uint32(wireLen))
	binary.BigEndian.PutUint32(h[8:], uint32(n))
	binary.BigEndian.PutUint64(h[12:], uint64(at))
}

// CaptureStream is the client's side of a running capture.
type CaptureStream struct {
	Info CaptureInfo
	conn net.Conn
	r    *bufio.Reader
	end  *CaptureEnd
	hdr  [captureHeaderLen]byte
	data []byte
}

// Capture asks the daemon at path to capture (req.Op is set to
// OpCapture) and returns the stream once the daemon has accepted; an
// error the daemon answers with is returned as Call returns it.
func Capture(path string, req Request) (*CaptureStream, error) {
	req.Op = OpCapture
	conn, err := dial(path)
	if err != nil {
		return nil, err
	}
	_ = conn.SetDeadline(time.Now().Add(ioTimeout))
	r := bufio.NewReaderSize(conn, 64<<10)
	resp, err := roundTrip(conn, r, req)
	if err == nil && resp.Capture == nil {
		err = errors.New("the daemon answered the capture request without starting one")
	}
	if err != nil {
		conn.Close()
		return nil, err
	}
	_ = conn.SetDeadline(time.Time{}) // frames come when they come
	return &CaptureStream{Info: *resp.Capture, conn: conn, r: r}, nil
}

// Next returns the next frame; io.EOF once the capture ended (End says
// how).
func (s *CaptureStream) Next() (CaptureFrame, error) {
	if s.end != nil {
		return CaptureFrame{}, io.EOF
	}
	if _, err := io.ReadFull(s.r, s.hdr[:]); err != nil {
		return CaptureFrame{}, s.cut(err)
	}
	h := s.hdr[:]
	n := binary.BigEndian.Uint32(h[8:])
	if n > maxRecord {
		return CaptureFrame{}, fmt.Errorf("capture stream: a record of %d bytes", n)
	}
	if cap(s.data) < int(n) {
		s.data = make([]byte, n)
	}
	body := s.data[:n]
	if _, err := io.ReadFull(s.r, body); err != nil {
		return CaptureFrame{}, s.cut(err)
	}
	switch h[0] {
	case recordFrame:
		at := int64(binary.BigEndian.Uint64(h[12:]))
		return CaptureFrame{Time: time.Unix(0, at), Out: h[1] == 'o', WireLen: int(binary.BigEndian.Uint32(h[4:])), Data: body}, nil
	case recordEnd:
		var e CaptureEnd
		if err := json.Unmarshal(body, &e); err != nil {
			return CaptureFrame{}, fmt.Errorf("capture stream: its end: %w", err)
		}
		s.end = &e
		return CaptureFrame{}, io.EOF
	}
	return CaptureFrame{}, fmt.Errorf("capture stream: a record of kind %q", h[0])
}

// cut is the error of a stream that ended without its end record.
func (s *CaptureStream) cut(err error) error {
	if errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return fmt.Errorf("the capture stream ended without its summary (did xvswitch stop?): %w", err)
}

// End is how the capture ended, once Next returned io.EOF.
func (s *CaptureStream) End() CaptureEnd {
	if s.end == nil {
		return CaptureEnd{}
	}
	return *s.end
}

// Buffered reports whether a record has arrived that Next has not
// returned yet; a writer flushes when it has not.
func (s *CaptureStream) Buffered() bool { return s.r.Buffered() > 0 }

// Stop asks the daemon to end the capture: Next goes on returning the
// frames it still held, then io.EOF.
func (s *CaptureStream) Stop() error {
	if cw, ok := s.conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return s.conn.Close()
}

// Close drops the connection; the daemon stops capturing.
func (s *CaptureStream) Close() error { return s.conn.Close() }
