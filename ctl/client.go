package ctl

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/user"
	"strconv"
	"syscall"
	"time"
)

// Call sends one request to the daemon listening at path and returns its
// response; a response carrying an error is returned with that error.
func Call(path string, req Request) (Response, error) {
	conn, err := dial(path)
	if err != nil {
		return Response{}, err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(ioTimeout))
	return roundTrip(conn, bufio.NewReader(conn), req)
}

// dial connects to the daemon's socket at path.
func dial(path string) (net.Conn, error) {
	conn, err := net.DialTimeout("unix", path, 5*time.Second)
	if err != nil {
		return nil, dialError(path, err)
	}
	return conn, nil
}

// roundTrip sends req on conn and reads the response line from r (conn's
// reader, which a stream goes on reading after it).
func roundTrip(conn net.Conn, r *bufio.Reader, req Request) (Response, error) {
	if err := json.NewEncoder(conn).Encode(req); err != nil {
		return Response{}, err
	}
	line, err := r.ReadBytes('\n')
	var resp Response
	if err == nil {
		err = json.Unmarshal(line, &resp)
	}
	if err != nil {
		return Response{}, fmt.Errorf("reading the daemon's answer: %w", err)
	}
	if resp.Error != "" {
		return resp, errors.New(resp.Error)
	}
	return resp, nil
}

// DialError is a failure to reach the daemon, worded for the operator;
// it wraps the dial's error (errors.Is(err, fs.ErrNotExist) and so on).
type DialError struct {
	msg string
	err error
}

func (e *DialError) Error() string { return e.msg }
func (e *DialError) Unwrap() error { return e.err }

// dialError says why the daemon at path cannot be reached: it is not
// running (no socket, or nothing listening on it), or this user may not
// use its socket.
func dialError(path string, err error) error {
	var msg string
	switch {
	case errors.Is(err, fs.ErrNotExist):
		msg = "is xvswitch running? no socket at " + path
	case errors.Is(err, syscall.ECONNREFUSED):
		msg = "is xvswitch running? nothing listens on " + path
	case errors.Is(err, fs.ErrPermission):
		msg = "permission denied on " + path + ": run as root or as a member of the socket's group"
		if g := socketGroup(path); g != "" {
			msg += " (" + g + ")"
		}
	default:
		return fmt.Errorf("control socket %s: %w", path, err)
	}
	return &DialError{msg: msg, err: err}
}

// socketGroup names the group of the file at path, if this user can see it.
func socketGroup(path string) string {
	fi, err := os.Stat(path)
	if err != nil {
		return ""
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return ""
	}
	gid := strconv.FormatUint(uint64(st.Gid), 10)
	if g, err := user.LookupGroupId(gid); err == nil {
		return g.Name
	}
	return "gid " + gid
}
