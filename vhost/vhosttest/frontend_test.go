package vhosttest_test

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"runtime/debug"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/xvswitch/xvswitch/vhost"
	"github.com/xvswitch/xvswitch/vhost/vhosttest"
	"github.com/xvswitch/xvswitch/virtionet"
	"github.com/xvswitch/xvswitch/virtq"
)

// These tests use the front-end as a switch's tests will: two guests on two
// devices, frames forwarded between them by a burst loop of the test's
// own, a guest whose memory faults, a guest that restarts.

func open(t *testing.T, cfg vhost.Config) *vhost.Device {
	t.Helper()
	cfg.Logger = slog.New(slog.DiscardHandler)
	if cfg.Name == "" {
		cfg.Name = t.Name()
	}
	d, err := vhost.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d
}

// burst runs fn on q's running state between Begin and End, as a switch
// worker brackets a burst, and reports whether q was running.
func burst(q *vhost.Queue, fn func(a *vhost.Active) error) (bool, error) {
	a := q.Begin()
	if a == nil {
		return false, nil
	}
	defer q.End()
	return true, fn(a)
}

// forward moves one burst from src's guest (TX queue of pair p) into dst's
// guest (RX queue of pair p) and returns how many frames it took.
func forward(t *testing.T, src, dst *vhost.Device, p int) int {
	t.Helper()
	n := 0
	_, err := burst(src.TxQueue(p), func(a *vhost.Active) error {
		var err error
		if n, err = a.Tx.Receive(virtq.MaxBurst); err != nil {
			return err
		}
		if _, err := burst(dst.RxQueue(p), func(b *vhost.Active) error {
			_, err := b.Rx.Deliver(a.Tx.Frames())
			return err
		}); err != nil {
			return err
		}
		return a.Tx.Complete()
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = seed ^ byte(i*13)
	}
	return b
}

// TestForward: frames of one buffer and of several (a TX chain, and with
// MRG_RXBUF several RX buffers) cross from one front-end to the other on
// every queue pair, intact, and the receiving guest is interrupted.
func TestForward(t *testing.T) {
	for _, packed := range []bool{true, false} {
		t.Run(fmt.Sprintf("packed=%v", packed), func(t *testing.T) {
			cfg := vhost.Config{QueuePairs: 2, MTU: 9000} // frames longer than 1514 pass
			da, db := open(t, cfg), open(t, cfg)
			a, b := vhosttest.Connect(t, da), vhosttest.Connect(t, db)
			o := vhosttest.Options{Packed: packed, QueuePairs: 2}
			a.Start(o)
			b.Start(o)
			if !da.Info().Ready || !db.Info().Ready || da.Info().Packed != packed {
				t.Fatalf("after Start: %+v, %+v", da.Info(), db.Info())
			}
			sizes := []int{60, 1514, 2100, 5000}
			for p := 0; p < 2; p++ {
				b.PostRx(p, 16)
				var sent [][]byte
				for i, n := range sizes {
					sent = append(sent, pattern(n, byte(10*p+i)))
				}
				if n := a.Send(p, sent...); n != len(sent) {
					t.Fatalf("pair %d: sent %d of %d", p, n, len(sent))
				}
				var got []vhosttest.Received
				vhosttest.WaitFor(t, "frames at b", func() bool {
					forward(t, da, db, p)
					got = append(got, b.Receive(p)...)
					return len(got) >= len(sent)
				})
				for i, r := range got {
					// 2048-byte buffers, 12 of them the header.
					if want := (virtionet.HeaderLen + sizes[i] + 2047) / 2048; !bytes.Equal(r.Frame, sent[i]) || int(r.NumBuffers) != want {
						t.Fatalf("pair %d frame %d: %d bytes in %d buffers, want %d bytes in %d", p, i, len(r.Frame), r.NumBuffers, sizes[i], want)
					}
				}
				if b.WaitCall(2*p, vhosttest.Timeout) == 0 {
					t.Fatalf("pair %d: no RX interrupt", p)
				}
				if cs, err := a.TxRing(p).Reap(); err != nil || len(cs) != len(sent) {
					t.Fatalf("pair %d: %d TX completions, %v", p, len(cs), err)
				}
			}
		})
	}
}

// TestSendReclaims: a full TX ring takes back what the device completed
// before it refuses a frame.
func TestSendReclaims(t *testing.T) {
	d := open(t, vhost.Config{})
	f := vhosttest.Connect(t, d)
	f.Start(vhosttest.Options{Packed: true, RingSize: 8})
	fr := make([][]byte, 8)
	for i := range fr {
		fr[i] = pattern(64, byte(i))
	}
	if n := f.Send(0, fr...); n != 8 {
		t.Fatalf("sent %d of 8", n)
	}
	if n := f.Send(0, fr[0]); n != 0 {
		t.Fatalf("sent %d into a full ring", n)
	}
	sink := open(t, vhost.Config{})
	if n := forward(t, d, sink, 0); n != 8 {
		t.Fatalf("device took %d", n)
	}
	if n := f.Send(0, fr...); n != 8 {
		t.Fatalf("sent %d of 8 after the device completed the first 8", n)
	}
}

// TestReconnect: the front-end restarts over its socket and the device
// runs again; the *FrontEnd stays usable.
func TestReconnect(t *testing.T) {
	path := filepath.Join(t.TempDir(), "vm.sock")
	d, sink := open(t, vhost.Config{Path: path}), open(t, vhost.Config{})
	f := vhosttest.Dial(t, path)
	f.Start(vhosttest.Options{})
	for round := 0; round < 3; round++ {
		vhosttest.WaitFor(t, "ready", func() bool { return d.Info().Ready })
		if f.Send(0, pattern(100, 1)) != 1 {
			t.Fatalf("round %d: not sent", round)
		}
		vhosttest.WaitFor(t, "the frame", func() bool { return forward(t, d, sink, 0) == 1 })
		f.Reconnect()
	}
}

// TestTruncateMemory: the device's next touch of truncated guest memory
// faults (a switch recovers it with debug.SetPanicOnFault); the front-end
// no longer touches it, and reconnects with fresh memory.
func TestTruncateMemory(t *testing.T) {
	d := open(t, vhost.Config{})
	f := vhosttest.Connect(t, d)
	f.Start(vhosttest.Options{Packed: true})
	f.Send(0, pattern(100, 1))
	f.TruncateMemory(1)
	var st unix.Stat_t
	if err := unix.Fstat(f.MemFDs()[1], &st); err != nil || st.Size != 0 {
		t.Fatalf("memfd size %d, %v", st.Size, err)
	}
	if _, err := f.TxRing(0).Add(vhosttest.Buf{Addr: f.Regions()[1].GuestAddr, Len: 64}); !errors.Is(err, vhosttest.ErrTruncated) {
		t.Fatalf("Add after truncation: %v", err)
	}
	faulted := make(chan any, 1)
	go func() {
		debug.SetPanicOnFault(true)
		defer func() { faulted <- recover() }()
		ran, err := burst(d.TxQueue(0), func(a *vhost.Active) error {
			if _, err := a.Tx.Receive(virtq.MaxBurst); err != nil {
				return err
			}
			a.Tx.Frames().Peek(0, make([]byte, 100))
			return nil
		})
		panic(fmt.Sprintf("no fault (queue running %v): %v", ran, err))
	}()
	// A memory fault, not any panic: the runtime says where it was.
	if r := <-faulted; !isFault(r) {
		t.Fatal(r)
	}
	d.Break(errors.New("guest memory fault"))
	if err := f.WaitClosed(); err == nil {
		t.Fatal("session ended cleanly")
	}
	f.Reconnect()
	if !d.Info().Ready || f.Send(0, pattern(100, 2)) != 1 {
		t.Fatalf("after Reconnect: %+v", d.Info())
	}
}

func isFault(r any) bool {
	_, ok := r.(interface{ Addr() uintptr })
	return ok
}
