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
	"time"
)

// ioTimeout bounds one request and its answer, so a stuck client never
// holds a server goroutine for long.
const ioTimeout = 30 * time.Second

// maxRequest is the longest request line the server reads.
const maxRequest = 64 << 10

// Handler answers one request. Requests arrive on their own goroutines.
type Handler func(Request) Response

// Serve listens on path (replacing a stale socket file, refusing one
// another daemon still listens on) and answers requests with h until ctx
// ends; the socket file is removed on return.
func Serve(ctx context.Context, path string, h Handler) error {
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
	if err := os.Chmod(path, 0o660); err != nil {
		l.Close()
		return err
	}
	go func() {
		<-ctx.Done()
		l.Close()
	}()
	defer os.Remove(path)
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
		go serveConn(conn, h)
	}
}

func serveConn(conn net.Conn, h Handler) {
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
	_ = json.NewEncoder(conn).Encode(resp)
}
