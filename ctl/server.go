package ctl

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// ioTimeout bounds one request and its answer, so a stuck client never
// holds a server goroutine for long.
const ioTimeout = 30 * time.Second

// maxRequest is the longest request line the server reads.
const maxRequest = 64 << 10

// Handler answers one request. Requests arrive on their own goroutines.
type Handler func(Request) Response

// Options are how ServeWith sets up its socket.
type Options struct {
	// Mode is the socket file's permissions (0: 0660, the owner and the
	// group may connect). The owner is the daemon's user.
	Mode os.FileMode
	// GID, when not 0, is the socket file's group: one the daemon is a
	// member of, or any if it has CAP_CHOWN.
	GID int
	// Ready, when set, is called once the socket listens with its mode
	// and group, before the first request is accepted.
	Ready func()
}

// Serve is ServeWith with the default Options.
func Serve(ctx context.Context, path string, h Handler) error {
	return ServeWith(ctx, path, h, Options{})
}

// ServeWith listens on path (replacing a stale socket file, refusing one
// another daemon still listens on) and answers requests with h until ctx
// ends; the socket file is removed on return, after the streams still
// running ended (at most streamGrace).
func ServeWith(ctx context.Context, path string, h Handler, o Options) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	if conn, err := net.DialTimeout("unix", path, time.Second); err == nil {
		conn.Close()
		return fmt.Errorf("control socket %s: another xvswitch is listening there", path)
	}
	_ = os.Remove(path)
	l, err := net.Listen("unix", path)
	if err != nil {
		return fmt.Errorf("control socket: %w", err)
	}
	if err := setPerm(path, o); err != nil {
		l.Close()
		return err
	}
	if o.Ready != nil {
		o.Ready()
	}
	go func() {
		<-ctx.Done()
		l.Close()
	}()
	defer os.Remove(path)
	var conns sync.WaitGroup
	defer waitConns(&conns)
	for {
		conn, err := l.Accept()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return nil
			}
			slog.Warn("control socket accept", "err", err)
			time.Sleep(10 * time.Millisecond)
			continue
		}
		conns.Add(1)
		go func() {
			defer conns.Done()
			serveConn(ctx, conn, h)
		}()
	}
}

// setPerm gives the socket file its mode and group.
func setPerm(path string, o Options) error {
	mode := o.Mode.Perm()
	if mode == 0 {
		mode = 0o660
	}
	if err := os.Chmod(path, mode); err != nil {
		return fmt.Errorf("control socket: %w", err)
	}
	if o.GID != 0 {
		if err := os.Lchown(path, -1, o.GID); err != nil {
			return fmt.Errorf("control socket: group %d: %w", o.GID, err)
		}
	}
	return nil
}

// streamGrace is how long Serve, stopping, waits for its connections:
// a stream ends when ctx does, and sends its last record.
const streamGrace = 3 * time.Second

func waitConns(wg *sync.WaitGroup) {
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(streamGrace):
	}
}

func serveConn(ctx context.Context, conn net.Conn, h Handler) {
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(ioTimeout))
	sc := bufio.NewScanner(conn)
	sc.Buffer(make([]byte, maxRequest), maxRequest)
	if !sc.Scan() {
		return
	}
	var req Request
	var resp Response
	if err := json.Unmarshal(sc.Bytes(), &req); err != nil {
		resp.Error = "bad request: " + err.Error()
	} else {
		resp = h(req)
	}
	err := json.NewEncoder(conn).Encode(resp)
	if resp.Stream != nil {
		serveStream(ctx, conn, resp.Stream, err)
	}
}

// serveStream runs a response's stream on conn until the client closes
// its side (cause ErrClientStopped) or ctx ends; if the response could not
// be written (werr), the stream starts with its context done.
func serveStream(ctx context.Context, conn net.Conn, stream Stream, werr error) {
	sctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	if werr != nil {
		cancel(werr)
	}
	_ = conn.SetDeadline(time.Time{})
	go func() {
		// The client sends nothing after its request: a read returns when
		// it closes its side or goes away.
		var b [1]byte
		_, _ = conn.Read(b[:])
		cancel(ErrClientStopped)
	}()
	if err := stream(sctx, timedWriter{conn}); err != nil {
		slog.Debug("control socket stream", "err", err)
	}
}

// timedWriter fails a write the client does not take within ioTimeout, so
// a client that stopped reading cannot hold a stream forever.
type timedWriter struct{ conn net.Conn }

func (w timedWriter) Write(b []byte) (int, error) {
	_ = w.conn.SetWriteDeadline(time.Now().Add(ioTimeout))
	return w.conn.Write(b)
}
