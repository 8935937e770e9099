package vswitch

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

// DefaultCtlPath is where the daemon listens for the CLI.
const DefaultCtlPath = "/run/xvswitch/ctl.sock"

// PortInfo is one row of `xvswitch show ports`.
type PortInfo struct {
	Name   string `json:"name"`
	Kind   string `json:"kind"` // "nic", "vhost", or "gen" (the benchmark-only generator)
	State  string `json:"state"`
	Queues int    `json:"queues"`
	Detail string `json:"detail"` // interface and XDP/AF_XDP mode, or socket path and negotiated ring
	Peer   string `json:"xconnect,omitempty"`
}

// Request is one control-socket request: a JSON object on one line.
type Request struct {
	Op    string `json:"op"`              // show-ports, show-fdb, show-stats, add-port, del-port
	NIC   string `json:"nic,omitempty"`   // add-port: a --nic spec
	Vhost string `json:"vhost,omitempty"` // add-port: a --vhost spec
	Name  string `json:"name,omitempty"`  // del-port
}

// Response answers a Request.
type Response struct {
	Error string         `json:"error,omitempty"`
	Ports []PortInfo     `json:"ports,omitempty"`
	FDB   []FDBRow       `json:"fdb,omitempty"`
	Stats []PortCounters `json:"stats,omitempty"`
}

// FDBRow is an FDB entry with its port's name.
type FDBRow struct {
	MAC    string `json:"mac"`
	Port   string `json:"port"`
	Static bool   `json:"static"`
	Age    uint32 `json:"age_seconds"`
}

// Controller is what the control server needs from the switch.
type Controller interface {
	Ports() []PortInfo
	FDB() []FDBRow
	Stats() []PortCounters
	AddNIC(NICSpec) error
	AddVhost(VhostSpec) error
	DelPort(name string) error
}

// ServeControl listens on path (replacing a stale socket file) and answers
// requests until ctx ends; the socket file is removed on return.
func ServeControl(ctx context.Context, path string, c Controller) error {
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
			if ctx.Err() != nil {
				return nil
			}
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			slog.Warn("control socket accept", "err", err)
			time.Sleep(10 * time.Millisecond)
			continue
		}
		go serveConn(conn, c)
	}
}

func serveConn(conn net.Conn, c Controller) {
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	var req Request
	sc := bufio.NewScanner(conn)
	sc.Buffer(make([]byte, 64<<10), 64<<10)
	var resp Response
	if !sc.Scan() {
		return
	}
	if err := json.Unmarshal(sc.Bytes(), &req); err != nil {
		resp.Error = "bad request: " + err.Error()
	} else {
		resp = handle(req, c)
	}
	_ = json.NewEncoder(conn).Encode(resp)
}

func handle(req Request, c Controller) Response {
	var resp Response
	var err error
	switch req.Op {
	case "show-ports":
		resp.Ports = c.Ports()
	case "show-fdb":
		resp.FDB = c.FDB()
	case "show-stats":
		resp.Stats = c.Stats()
	case "add-port":
		switch {
		case req.NIC != "" && req.Vhost == "":
			var n NICSpec
			if n, err = ParseNIC(req.NIC); err == nil {
				err = c.AddNIC(n)
			}
		case req.Vhost != "" && req.NIC == "":
			var v VhostSpec
			if v, err = ParseVhost(req.Vhost); err == nil {
				err = c.AddVhost(v)
			}
		default:
			err = errors.New("add-port needs exactly one of --nic or --vhost")
		}
	case "del-port":
		err = c.DelPort(req.Name)
	default:
		err = fmt.Errorf("unknown op %q", req.Op)
	}
	if err != nil {
		resp.Error = err.Error()
	}
	return resp
}

// Call sends one request to the daemon at path and returns its response.
func Call(path string, req Request) (Response, error) {
	conn, err := net.DialTimeout("unix", path, 5*time.Second)
	if err != nil {
		return Response{}, fmt.Errorf("is xvswitch running? %w", err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	if err := json.NewEncoder(conn).Encode(req); err != nil {
		return Response{}, err
	}
	var resp Response
	if err := json.NewDecoder(conn).Decode(&resp); err != nil {
		return Response{}, fmt.Errorf("reading the daemon's answer: %w", err)
	}
	if resp.Error != "" {
		return resp, errors.New(resp.Error)
	}
	return resp, nil
}
