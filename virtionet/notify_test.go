package virtionet

import (
	"encoding/binary"
	"math/rand"
	"testing"

	"golang.org/x/sys/unix"
)

// eventfd returns a non-blocking eventfd and a function reading (and
// clearing) its counter.
func eventfd(t *testing.T) (int, func() uint64) {
	fd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return fd, func() uint64 {
		var b [8]byte
		if _, err := unix.Read(fd, b[:]); err == unix.EAGAIN {
			return 0
		} else if err != nil {
			t.Fatal(err)
		}
		return binary.LittleEndian.Uint64(b[:])
	}
}

// TestNotifyOncePerBurst: the call eventfd is written once per burst when
// the guest asks for interrupts, never when it does not.
func TestNotifyOncePerBurst(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.String(), func(t *testing.T) {
			rng := rand.New(rand.NewSource(9))

			rx, rq := rxCase(t, k, 0, featMrg, 0)
			fd, read := eventfd(t)
			rq.SetCallFD(fd)
			for i := 0; i < 64; i++ {
				rx.post(2048)
			}
			f := &Frames{}
			for i := 0; i < 32; i++ {
				f.AddBytes(frame(rng, 1000))
			}
			rx.interrupts(true)
			if n, _ := rq.Deliver(f); n != 32 {
				t.Fatalf("delivered %d", n)
			}
			if c := read(); c != 1 {
				t.Fatalf("RX burst with interrupts on: eventfd counter %d, want 1", c)
			}
			rx.interrupts(false)
			if n, _ := rq.Deliver(f); n != 32 {
				t.Fatalf("delivered %d", n)
			}
			if c := read(); c != 0 {
				t.Fatalf("RX burst with interrupts off: eventfd counter %d, want 0", c)
			}
			if s := rq.Snapshot(); s.Notifies != 1 {
				t.Fatalf("Notifies %d, want 1", s.Notifies)
			}

			tx := newGuest(t, k, 256, 0)
			tq := NewTxQueue(tx.ring, QueueConfig{Index: 1, Features: featV1})
			fd2, read2 := eventfd(t)
			tq.SetCallFD(fd2)
			for i := 0; i < 64; i++ {
				tx.send(frame(rng, 100), HeaderLen, hdrCombined)
			}
			tx.interrupts(true)
			tq.Receive(32)
			if err := tq.Complete(); err != nil {
				t.Fatal(err)
			}
			if c := read2(); c != 1 {
				t.Fatalf("TX burst with interrupts on: eventfd counter %d, want 1", c)
			}
			tx.interrupts(false)
			tq.Receive(32)
			if err := tq.Complete(); err != nil {
				t.Fatal(err)
			}
			if c := read2(); c != 0 {
				t.Fatalf("TX burst with interrupts off: eventfd counter %d, want 0", c)
			}
			tq.SetCallFD(-1)
		})
	}
}
