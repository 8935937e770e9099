package ctl

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// serve starts Serve on a fresh socket with h and returns its path; the
// server stops when the test ends and must return nil.
func serve(t *testing.T, h Handler) (string, context.CancelFunc) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ctl.sock")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, path, h) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	for i := 0; i < 200; i++ {
		if c, err := net.Dial("unix", path); err == nil {
			c.Close()
			return path, cancel
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatal("control socket never came up")
	return "", nil
}

func TestCallRoundTrip(t *testing.T) {
	var got []Request
	path, _ := serve(t, func(r Request) Response {
		got = append(got, r)
		switch r.Op {
		case OpShowStats:
			return Response{Stats: []PortCounters{SumQueues("vm1", []QueueCounters{
				{RxPackets: 3, RxBytes: 180, Drops: map[string]uint64{"no_rx_buffers": 1}},
				{Queue: 1, RxPackets: 2, RxBytes: 120, FloodCopies: 4, Drops: map[string]uint64{"no_rx_buffers": 2}},
			})}}
		case OpDelPort:
			return Response{Error: "no such port: " + r.Name}
		}
		return Response{}
	})
	resp, err := Call(path, Request{Op: OpShowStats})
	if err != nil || len(resp.Stats) != 1 {
		t.Fatalf("show-stats: %+v %v", resp, err)
	}
	if p := resp.Stats[0]; p.RxPackets != 5 || p.RxBytes != 300 || p.FloodCopies != 4 || p.Drops["no_rx_buffers"] != 3 || len(p.Queues) != 2 {
		t.Fatalf("port totals not summed from its queues: %+v", p)
	}
	if _, err := Call(path, Request{Op: OpDelPort, Name: "nope"}); err == nil || err.Error() != "no such port: nope" {
		t.Fatalf("a response's error is not the call's: %v", err)
	}
	if len(got) != 2 || got[1].Name != "nope" {
		t.Fatalf("handler saw %+v", got)
	}
}

func TestServeRejectsGarbageAndRefusesALiveSocket(t *testing.T) {
	path, _ := serve(t, func(Request) Response { return Response{} })
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("{not json\n")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 256)
	n, _ := c.Read(buf)
	if want := `{"error":"bad request:`; len(buf[:n]) < len(want) || string(buf[:len(want)]) != want {
		t.Fatalf("garbage request answered %q", buf[:n])
	}
	// A second server on the same path refuses to steal it.
	if err := Serve(context.Background(), path, nil); err == nil {
		t.Fatal("second server took over a live control socket")
	}
}

func TestServeRemovesItsSocket(t *testing.T) {
	path, cancel := serve(t, func(Request) Response { return Response{} })
	cancel()
	for i := 0; i < 200; i++ {
		if _, err := os.Stat(path); os.IsNotExist(err) {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatal("socket file left behind after Serve returned")
}

// TestServeWithPermissions: the socket has its mode and group when Ready
// is called, and answers right after.
func TestServeWithPermissions(t *testing.T) {
	// A group the test may give a file: its own, or any for root.
	gid := os.Getgid()
	if gid == 0 {
		gid = 4242
	}
	path := filepath.Join(t.TempDir(), "ctl.sock")
	ready := make(chan os.FileInfo, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- ServeWith(ctx, path, func(Request) Response { return Response{} }, Options{
			Mode: 0o640, GID: gid,
			Ready: func() {
				fi, err := os.Stat(path)
				if err != nil {
					t.Error(err)
				}
				ready <- fi
			},
		})
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("ServeWith: %v", err)
		}
	}()
	var fi os.FileInfo
	select {
	case fi = <-ready:
	case err := <-done:
		t.Fatalf("ServeWith returned before Ready: %v", err)
	case <-time.After(5 * time.Second):
		t.Fatal("Ready never called")
	}
	if fi == nil {
		t.FailNow()
	}
	if fi.Mode().Perm() != 0o640 || fi.Mode()&os.ModeSocket == 0 {
		t.Errorf("socket mode %v, want 0640 and a socket", fi.Mode())
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); !ok || int(st.Gid) != gid {
		t.Errorf("socket group %v, want %d", fi.Sys(), gid)
	}
	if _, err := Call(path, Request{Op: OpShowPorts}); err != nil {
		t.Fatalf("after Ready: %v", err)
	}
}

// TestServeDefaultMode: without options the socket is 0660, as before.
func TestServeDefaultMode(t *testing.T) {
	path, _ := serve(t, func(Request) Response { return Response{} })
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o660 {
		t.Fatalf("socket %v %v, want mode 0660", fi, err)
	}
}
