package ctl

import (
	"context"
	"net"
	"os"
	"path/filepath"
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
