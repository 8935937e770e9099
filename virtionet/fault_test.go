package virtionet

import (
	"bytes"
	"math/rand"
	"runtime/debug"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/xvswitch/xvswitch/virtq"
	"github.com/xvswitch/xvswitch/virtq/drivertest"
)

// The switch's workers run with debug.SetPanicOnFault: when a front-end
// truncates the memfd behind guest memory, the next touch unwinds the
// worker's burst from wherever it was, here from the middle of a frame's
// copy, and the worker recovers (vswitch/fault.go). These tests fault a
// Deliver the same way and check what the queue leaves behind.

// deliverFault runs Deliver as a worker does and returns what unwound it
// (nil if it returned).
func deliverFault(q *RxQueue, f *Frames) (fault any) {
	old := debug.SetPanicOnFault(true)
	defer debug.SetPanicOnFault(old)
	defer func() { fault = recover() }()
	_, _ = q.Deliver(f)
	return nil
}

func isMemoryFault(r any) bool {
	_, ok := r.(interface{ Addr() uintptr })
	return ok
}

// doomed returns n bytes of a memfd mapping holding b, and a func that
// truncates the file under it: touching the bytes then faults.
func doomed(t *testing.T, b []byte) ([]byte, func()) {
	t.Helper()
	fd, err := unix.MemfdCreate("virtionet-doomed", unix.MFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	if err := unix.Ftruncate(fd, int64(len(b))); err != nil {
		t.Fatal(err)
	}
	m, err := unix.Mmap(fd, 0, len(b), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(m) })
	copy(m, b)
	return m, func() {
		if err := unix.Ftruncate(fd, 0); err != nil {
			t.Fatal(err)
		}
	}
}

// TestRxFaultInSource: the second half of a frame lives in memory whose
// file is truncated (another guest's TX buffer: that guest is broken, this
// one carries on). The fault interrupts the copy into this guest's
// buffers; nothing of the frame reaches the used ring, the frames staged
// before it do, and the next burst on the queue is delivered whole. The
// interrupted frame and the ones after it count as memory_fault drops.
func TestRxFaultInSource(t *testing.T) {
	for _, k := range kinds {
		for _, mrg := range []bool{true, false} {
			t.Run(k.String()+map[bool]string{true: "/mrg"}[mrg], func(t *testing.T) {
				var feat uint64
				if mrg {
					feat = featMrg
				}
				g, q := rxCase(t, k, 0, feat, MaxFrameLen(9000))
				for i := 0; i < 8; i++ {
					g.post(2048)
				}
				rng := rand.New(rand.NewSource(3))
				// f1's doomed part is what lands in its last buffer (its
				// second with MRG_RXBUF: the first is written whole).
				f0, f1, f2 := frame(rng, 100), frame(rng, 1500), frame(rng, 100)
				cut := 1000
				if mrg {
					f1, cut = frame(rng, 3000), 2500
				}
				tail, truncate := doomed(t, f1[cut:])
				f := &Frames{}
				f.AddBytes(f0)
				f.Add([][]byte{f1[:cut], tail})
				f.AddBytes(f2)
				truncate()
				if r := deliverFault(q, f); !isMemoryFault(r) {
					t.Fatalf("Deliver unwound with %v, want a memory fault", r)
				}
				checkStats(t, q.Snapshot(), 1, len(f0), map[DropReason]int{DropMemoryFault: 2})

				// The queue goes on: the next burst lands after f0.
				g0, g1 := frame(rng, 200), frame(rng, 1400)
				if mrg {
					g1 = frame(rng, 3000)
				}
				if n, err := q.Deliver(framesOf(g0, g1)); n != 2 || err != nil {
					t.Fatalf("Deliver after the fault = %d, %v", n, err)
				}
				checkReceived(t, g, mrg, [][]byte{f0, g0, g1})
				checkStats(t, q.Snapshot(), 3, len(f0)+len(g0)+len(g1), map[DropReason]int{DropMemoryFault: 2})
			})
		}
	}
}

// TestRxFaultInGuestBuffer: a merged frame's second buffer is in a region
// whose memfd the guest's front-end truncated. The fault interrupts the
// frame after its first buffer was written; when the ring is then stopped
// (the device is broken, and vhost flushes the queue before it lets the
// ring go) the frame's buffers come back unused, never as a frame: the
// used ring shows the whole frame before it, then only empty buffers.
func TestRxFaultInGuestBuffer(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.String(), func(t *testing.T) {
			m, fds := sharedMem(t, 1<<20, 1<<20, 1<<20)
			g := newGuestOn(t, m, k, 64, 0)
			q := NewRxQueue(g.ring, QueueConfig{Features: featV1 | featMrg, MaxFrame: MaxFrameLen(9000)})
			ids := []uint16{
				g.post(2048), // f0
				g.post(2048), // f1's first buffer
				g.add([]buf{{Addr: m.Alloc(2, 2048, 64), Len: 2048, Write: true}}), // f1's second, doomed
			}
			for i := 0; i < 4; i++ {
				ids = append(ids, g.post(2048))
			}
			rng := rand.New(rand.NewSource(4))
			f0, f1, f2 := frame(rng, 100), frame(rng, 3000), frame(rng, 100)
			if err := unix.Ftruncate(fds[2], 0); err != nil {
				t.Fatal(err)
			}
			if r := deliverFault(q, framesOf(f0, f1, f2)); !isMemoryFault(r) {
				t.Fatalf("Deliver unwound with %v, want a memory fault", r)
			}
			if err := q.Flush(); err != nil {
				t.Fatal(err)
			}
			// Flush gives back what the queue popped: at least f0's
			// buffer and f1's two.
			cs := g.reap()
			if len(cs) < 3 {
				t.Fatalf("%d buffers used after the flush, want at least 3", len(cs))
			}
			if got, err := g.received(cs[:1], HeaderLen, true); err != nil || len(got) != 1 || !bytes.Equal(got[0], f0) {
				t.Fatalf("first used buffer: %d frames (%v), want f0", len(got), err)
			}
			for i, c := range cs[1:] {
				if c.id != ids[i+1] || c.n != 0 {
					t.Fatalf("used %d: buffer %d with %d bytes, want buffer %d unused", i+1, c.id, c.n, ids[i+1])
				}
			}
			checkStats(t, q.Snapshot(), 1, len(f0), map[DropReason]int{DropMemoryFault: 2})
		})
	}
}

// TestRxFaultAfterPush: a Deliver that filled its used list pushed the
// frames so far, then faulted before it could interrupt the guest. The
// next Deliver interrupts it even if it has nothing of its own to push,
// so the frames published before the fault are not left unannounced.
func TestRxFaultAfterPush(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.String(), func(t *testing.T) {
			g := newGuest(t, k, 256, 0)
			line, interrupts := callLine(t)
			q := NewRxQueue(g.ring, QueueConfig{Features: featV1 | featMrg, MaxFrame: MaxFrameLen(9000), Call: line})
			g.interrupts(true)
			for i := 0; i < 100; i++ {
				g.post(1024)
			}
			// 21 frames of 3 buffers fill 63 of the 64 used entries, so
			// the 22nd pushes them before it is copied, and faults.
			rng := rand.New(rand.NewSource(5))
			f := &Frames{}
			var want [][]byte
			for i := 0; i < 21; i++ {
				want = append(want, frame(rng, 3000))
				f.AddBytes(want[i])
			}
			src, truncate := doomed(t, frame(rng, 3000))
			f.AddBytes(src)
			truncate()
			if r := deliverFault(q, f); !isMemoryFault(r) {
				t.Fatalf("Deliver unwound with %v, want a memory fault", r)
			}
			time.Sleep(20 * time.Millisecond) // room for a wrong interrupt to arrive
			if n := interrupts(); n != 0 {
				t.Fatalf("%d interrupts from the faulted Deliver", n)
			}
			// Nothing to push: the frame is too long.
			if n, err := q.Deliver(framesOf(frame(rng, 10000))); n != 0 || err != nil {
				t.Fatalf("Deliver = %d, %v", n, err)
			}
			// The Notifier writes the call eventfd on its own goroutine.
			if n := waitCount(t, "the interrupt for the frames pushed before the fault", interrupts, 1); n != 1 {
				t.Fatalf("%d interrupts after the faulted Deliver's push, want 1", n)
			}
			checkReceived(t, g, true, want)
			checkStats(t, q.Snapshot(), 21, 21*3000, map[DropReason]int{DropMemoryFault: 1, DropTooLong: 1})
		})
	}
}

// TestRxFaultInRing: the memory behind the ring itself is truncated, so
// Deliver faults in its first pop (Fill's first pass on either ring, Pop
// under IN_ORDER on the packed ring) before any frame is placed:
// every frame of the burst counts as memory_fault, none goes missing.
func TestRxFaultInRing(t *testing.T) {
	for _, v := range []struct {
		kind    ringKind
		inOrder bool
	}{{kindPacked, false}, {kindPacked, true}, {kindSplit, false}} {
		t.Run(v.kind.String()+map[bool]string{true: "/in-order"}[v.inOrder], func(t *testing.T) {
			m, fds := sharedMem(t, 1<<20, 1<<20)
			var ringFeat uint64
			if v.inOrder {
				ringFeat = 1 << virtq.FeatureInOrder
			}
			g := newGuestOn(t, m, v.kind, 64, ringFeat)
			q := NewRxQueue(g.ring, QueueConfig{Features: featV1 | featMrg | ringFeat})
			for i := 0; i < 4; i++ {
				g.post(2048)
			}
			if err := unix.Ftruncate(fds[0], 0); err != nil {
				t.Fatal(err)
			}
			rng := rand.New(rand.NewSource(7))
			if r := deliverFault(q, framesOf(frame(rng, 100), frame(rng, 100), frame(rng, 100))); !isMemoryFault(r) {
				t.Fatalf("Deliver unwound with %v, want a memory fault", r)
			}
			checkStats(t, q.Snapshot(), 0, 0, map[DropReason]int{DropMemoryFault: 3})
		})
	}
}

// sharedMem is guest memory of regions of the given sizes, each backed by
// a memfd (fds) a test can truncate under it; all closed when t ends.
func sharedMem(t *testing.T, sizes ...uint64) (*drivertest.Mem, []int) {
	t.Helper()
	m, fds, err := drivertest.NewSharedMem(sizes...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		m.Close()
		for _, fd := range fds {
			unix.Close(fd)
		}
	})
	return m, fds
}
