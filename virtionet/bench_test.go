package virtionet

import (
	"encoding/binary"
	"fmt"
	"math/rand"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/xvswitch/xvswitch/virtq"
	"github.com/xvswitch/xvswitch/virtq/drivertest"
)

// A pool of guest buffers reused round-robin by many descriptors, so that a
// large ring (few refills, which run with the timer stopped) still touches
// only as much memory as a real ring of poolSize buffers would.
const (
	benchRing = 32768
	poolSize  = 512
)

type pool struct {
	g    *guest
	addr []uint64
	next int
}

func newPool(g *guest, bufLen uint32, fill func([]byte)) *pool {
	p := &pool{g: g}
	for i := 0; i < poolSize; i++ {
		a := g.m.Alloc(1, uint64(bufLen), 64)
		if fill != nil {
			fill(g.m.Bytes(a, uint64(bufLen)))
		}
		p.addr = append(p.addr, a)
	}
	return p
}

func (p *pool) take() uint64 {
	a := p.addr[p.next]
	p.next = (p.next + 1) % len(p.addr)
	return a
}

// refill reaps what the device completed and adds one-descriptor chains
// of bufLen bytes from p until the ring is full, without the bookkeeping of
// guest.add (benchmarks run it millions of times); it returns how many
// chains are available to the device.
func (g *guest) refill(p *pool, bufLen uint32, write bool) int {
	g.t.Helper()
	switch g.kind {
	case kindPacked:
		if _, err := g.pk.Reap(g.scratch[:0]); err != nil {
			g.t.Fatal(err)
		}
		one := [1]buf{}
		for g.pk.FreeSlots() > 0 && g.pk.InFlight() < int(g.pk.Size) {
			one[0] = buf{Addr: p.take(), Len: bufLen, Write: write}
			if _, err := g.pk.Add(one[:]); err != nil {
				g.t.Fatal(err)
			}
		}
		return g.pk.InFlight() - g.ring.InFlight()
	default:
		if g.fast {
			// Recycle the heads the device used, in used-ring order,
			// straight into the avail ring: their descriptors are
			// still in the table. The driver model's own bookkeeping
			// goes stale, which the benchmarks never consult.
			d := g.sp
			for ; g.lastUsed != d.UsedIdx(); g.lastUsed++ {
				e := d.Used[4+8*int(g.lastUsed&(d.Size-1)):]
				d.WriteAvail(g.availIdx, uint16(binary.LittleEndian.Uint32(e)))
				g.availIdx++
			}
			d.PublishIdx(g.availIdx)
			return int(d.Size) - g.ring.InFlight()
		}
		one := [1]drivertest.SplitBuf{}
		for g.sp.FreeDescs() > 0 {
			one[0] = drivertest.SplitBuf{Addr: p.take(), Len: bufLen, Write: write}
			if _, err := g.sp.AddChain(one[:], nil); err != nil {
				g.t.Fatal(err)
			}
		}
		g.sp.Publish()
		g.fast, g.availIdx = true, g.sp.AvailIdx()
		return g.sp.Outstanding() - g.ring.InFlight()
	}
}

// BenchmarkRxBurst32 delivers bursts of 32 single-segment frames (as from
// UMEM) into 2 KiB mergeable guest buffers: header, copy, used entries.
func BenchmarkRxBurst32(b *testing.B) {
	for _, k := range kinds {
		for _, size := range []int{64, 1500} {
			b.Run(fmt.Sprintf("%s/%d", k, size), func(b *testing.B) {
				g := newGuest(b, k, benchRing, 0)
				q := NewRxQueue(g.ring, QueueConfig{Features: featV1 | featMrg})
				p := newPool(g, 2048, nil)
				src := frame(rand.New(rand.NewSource(1)), size)
				f := &Frames{}
				for f.AddBytes(src) {
				}
				avail := 0
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if avail < virtq.MaxBurst {
						b.StopTimer()
						avail = g.refill(p, 2048, true)
						b.StartTimer()
					}
					if n, err := q.Deliver(f); n != virtq.MaxBurst || err != nil {
						b.Fatalf("Deliver = %d, %v", n, err)
					}
					avail -= virtq.MaxBurst
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*virtq.MaxBurst), "ns/frame")
			})
		}
	}
}

// BenchmarkTxBurst32 receives bursts of 32 frames the guest sent (header
// and frame in one descriptor, as Linux does with headroom), copies each
// out to a local buffer as a port would into UMEM, and completes them.
// "/offloads": from a guest that negotiated the offloads (as DPDK's
// virtio-user does), each frame behind a header that asks for none.
func BenchmarkTxBurst32(b *testing.B) {
	for _, k := range kinds {
		for _, tc := range []struct {
			size int
			name string
			feat uint64
		}{{64, "", 0}, {1500, "", 0}, {64, "/offloads", featOffloads}} {
			size := tc.size
			b.Run(fmt.Sprintf("%s/%d%s", k, size, tc.name), func(b *testing.B) {
				g := newGuest(b, k, benchRing, 0)
				q := NewTxQueue(g.ring, QueueConfig{Index: 1, Features: featV1 | tc.feat})
				src := frame(rand.New(rand.NewSource(1)), size)
				chainLen := uint32(HeaderLen + size)
				p := newPool(g, chainLen, func(m []byte) { copy(m[HeaderLen:], src) })
				umem := make([]byte, 2048)
				avail := 0
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if avail < virtq.MaxBurst {
						b.StopTimer()
						if err := q.Complete(); err != nil {
							b.Fatal(err)
						}
						avail = g.refill(p, chainLen, false)
						b.StartTimer()
					}
					n, err := q.Receive(virtq.MaxBurst)
					if n != virtq.MaxBurst || err != nil {
						b.Fatalf("Receive = %d, %v", n, err)
					}
					f := q.Frames()
					for j := 0; j < f.Len(); j++ {
						w := 0
						for _, s := range f.Segments(j) {
							w += copy(umem[w:], s)
						}
					}
					if err := q.Complete(); err != nil {
						b.Fatal(err)
					}
					avail -= n
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*virtq.MaxBurst), "ns/frame")
			})
		}
	}
}

// BenchmarkNotify compares raising an interrupt through a Notifier line
// with the eventfd write the worker used to make itself.
//   - cost: what the worker pays per burst that wants an interrupt, with
//     the guest (the test) never reading: the direct write, or Signal.
//   - latency: from asking for the interrupt to the guest seeing its
//     eventfd readable (a blocking poll on it), then reading it.
func BenchmarkNotify(b *testing.B) {
	newLine := func(b *testing.B) (*Line, int) {
		n, err := NewNotifier(NotifierConfig{Lines: 1})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { n.Close(); <-n.Done() })
		fd := benchEventFD(b)
		d, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
		if err != nil {
			b.Fatal(err)
		}
		n.Line(0).SetFD(d)
		return n.Line(0), fd
	}
	b.Run("cost/direct-write", func(b *testing.B) {
		fd := benchEventFD(b)
		for b.Loop() {
			_, _ = unix.Write(fd, one[:])
		}
	})
	b.Run("cost/signal", func(b *testing.B) {
		l, _ := newLine(b)
		for b.Loop() {
			l.Signal()
		}
	})
	wait := func(b *testing.B, fd int) {
		p := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		if n, err := unix.Poll(p, 1000); n != 1 || err != nil {
			b.Fatalf("no interrupt within 1s: %d, %v", n, err)
		}
		if _, err := ReadEventFD(fd); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("latency/direct-write", func(b *testing.B) {
		fd := benchEventFD(b)
		for b.Loop() {
			_, _ = unix.Write(fd, one[:])
			wait(b, fd)
		}
	})
	b.Run("latency/signal", func(b *testing.B) {
		l, fd := newLine(b)
		for b.Loop() {
			l.Signal()
			wait(b, fd)
		}
	})
}

func benchEventFD(b *testing.B) int {
	fd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { unix.Close(fd) })
	return fd
}
