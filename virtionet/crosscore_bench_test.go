package virtionet

import (
	"math/rand"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/xvswitch/xvswitch/guestmem"
	"github.com/xvswitch/xvswitch/test/hostprobe"
	"github.com/xvswitch/xvswitch/virtq/drivertest"
)

// BenchmarkRxCrossCore measures guest RX with the guest on the other CPU,
// as in the bench's switch -> VM: the device (this goroutine, pinned to
// CPU 1) delivers bursts of 32 frames of 64 bytes (1500 in the -1500
// cases) into a 4096-slot ring with 512 buffers posted (DPDK testpmd's
// default), and a minimal driver
// (crossdriver_test.go, pinned to CPU 0) reaps each used buffer and posts
// it again, so every descriptor line moves between the cores as with a
// real guest: it reads each received buffer's header, as DPDK's virtio PMD
// and Linux's virtio_net do (crossDriver). Its buffers are laid out as
// DPDK's mbufs (mbuf: the header in the last 12 bytes of the headroom, the
// frame from the start of a line) or as Linux's mergeable buffers (linux:
// the header from the start of a line, the frame 12 bytes in). In the
// -reads case the driver also reads every line of each frame, as a guest
// that consumes them, so that the rates (Mfps) show what the device's way
// of writing costs the guest. BenchmarkRxBurst32 refills with the timer
// stopped on one core and cannot see that traffic.
//
// On the shared virtual machines this runs on, two things of the host's
// move the result by up to 2x, second by second: steal time (the
// hypervisor running something else on a vCPU's host thread) and the
// cross-CPU latency, which is bimodal (~25-45 ns one way when the host
// runs the two vCPUs close, ~160-260 ns when not). So the ring kinds are
// measured in alternated slices of 50 ms (b.N pairs, packed then split;
// run with -benchtime 40x or more): a pair with any steal tick on either
// CPU is left out, and the others are reported by the latency measured
// just before and just after them (near: both under farNs; far: both
// over; the rest left out). Per state: the pairs counted, each kind's
// device cost per frame (the time of the bursts that found a buffer for
// every frame, per frame; median over the pairs) and packed's speedup
// over split (median of the pairs' ratios). Over all counted pairs: each
// kind's rate, how much of what the device offered found a buffer
// (fed%: below 100, the driver set the pace at times), and how much of
// what it delivered went with streaming stores (streamed%: an eager Fill,
// for a while after the ring ran dry, copies ordinarily). Needs 2 CPUs.
func BenchmarkRxCrossCore(b *testing.B) {
	if runtime.NumCPU() < 2 {
		b.Skip("needs 2 CPUs: the guest runs on the other one")
	}
	mbuf := func(m *drivertest.Mem) uint64 { return m.Alloc(1, 128+crossBufLen, 128) + 128 - HeaderLen }
	linux := func(m *drivertest.Mem) uint64 { return m.Alloc(1, crossBufLen, 64) }
	b.Run("mbuf", func(b *testing.B) { rxCrossCore(b, mbuf, 64, false) })
	b.Run("linux", func(b *testing.B) { rxCrossCore(b, linux, 64, false) })
	b.Run("mbuf-1500", func(b *testing.B) { rxCrossCore(b, mbuf, 1500, false) })
	b.Run("linux-1500", func(b *testing.B) { rxCrossCore(b, linux, 1500, false) })
	b.Run("linux-1500-reads", func(b *testing.B) { rxCrossCore(b, linux, 1500, true) })
}

// crossBufLen is the length of BenchmarkRxCrossCore's buffers.
const crossBufLen = 2048

// rxCrossCore is BenchmarkRxCrossCore with the buffers that bufAt places,
// frames of frameLen bytes, and a driver that reads every line of them
// or not (crossDriver.readsFrames).
func rxCrossCore(b *testing.B, bufAt func(*drivertest.Mem) uint64, frameLen int, reads bool) {
	const (
		ringSize = 4096
		posted   = 512
		bufLen   = crossBufLen
		slice    = 50 * time.Millisecond
	)
	src := frame(rand.New(rand.NewSource(1)), frameLen)
	f := &Frames{}
	for f.AddBytes(src) {
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	restore, err := hostprobe.PinThread(1)
	if err != nil {
		b.Skipf("pinning to CPU 1: %v", err)
	}
	defer restore()
	var rxs [2]*RxQueue
	var drivers [2]*crossDriver
	for i, k := range kinds {
		g := newGuest(b, k, ringSize, 0)
		g.interrupts(false)
		for range posted {
			g.add([]buf{{Addr: bufAt(g.m), Len: bufLen, Write: true}})
		}
		rxs[i] = NewRxQueue(g.ring, QueueConfig{Features: featV1 | featMrg})
		drivers[i] = newCrossDriver(g, reads)
		go drivers[i].run()
	}
	defer func() {
		for _, d := range drivers {
			d.stop()
		}
	}()
	var all, clean []crossPair
	ord0, str0 := guestmem.StreamWindows()
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		var pair crossPair
		pair.latBefore = crossLatency()
		for i := range kinds {
			drivers[i].resume()
			pair.s[i] = deliverFor(b, rxs[i], f, slice)
			drivers[i].pause()
		}
		pair.latAfter = crossLatency()
		all = append(all, pair)
		if pair.s[0].steal == 0 && pair.s[1].steal == 0 {
			clean = append(clean, pair)
		}
	}
	b.StopTimer()
	// How the rings' stores chose over the run (both kinds, every state):
	// the share of their measuring windows that chose streaming.
	ord1, str1 := guestmem.StreamWindows()
	if n := ord1 - ord0 + str1 - str0; n > 0 {
		b.ReportMetric(100*float64(str1-str0)/float64(n), "streaming-windows%")
	}
	// Slices during which the hypervisor ran something else on either
	// CPU (steal time, /proc/stat) measured the host, not the code: only
	// pairs without any count, unless there are none.
	b.ReportMetric(100*float64(len(clean))/float64(len(all)), "clean-pairs%")
	if len(clean) == 0 {
		clean = all
	}
	for _, state := range []struct {
		name string
		far  bool
	}{{"near", false}, {"far", true}} {
		var ps []crossPair
		for _, p := range clean {
			if (p.latBefore >= farNs) == state.far && (p.latAfter >= farNs) == state.far {
				ps = append(ps, p)
			}
		}
		b.ReportMetric(float64(len(ps)), state.name+"-pairs")
		if len(ps) == 0 {
			continue
		}
		for i, k := range kinds {
			b.ReportMetric(medianOf(ps, func(p crossPair) float64 { return p.s[i].fedNs() }), state.name+"-"+k.String()+"-ns/frame")
		}
		b.ReportMetric(medianOf(ps, func(p crossPair) float64 { return p.s[1].fedNs() / p.s[0].fedNs() }), state.name+"-"+kinds[0].String()+"-speedup")
	}
	for i, k := range kinds {
		b.ReportMetric(medianOf(clean, func(p crossPair) float64 { return p.s[i].mfps() }), k.String()+"-Mfps")
		b.ReportMetric(medianOf(clean, func(p crossPair) float64 { return p.s[i].fedPct() }), k.String()+"-fed%")
		b.ReportMetric(medianOf(clean, func(p crossPair) float64 { return p.s[i].streamedPct() }), k.String()+"-streamed%")
	}
}

// farNs separates the two states of the host's cross-CPU latency (one
// way, ns).
const farNs = 90

// crossPair is a packed slice and the split slice after it, with the
// cross-CPU latency just before and just after them.
type crossPair struct {
	s                   [2]crossSlice
	latBefore, latAfter float64
}

// crossSlice is what one slice of BenchmarkRxCrossCore measured.
type crossSlice struct {
	elapsed time.Duration
	offered int // frames given to Deliver
	got     int // frames delivered
	stream  int // of those, written with streaming stores (RxQueue.LastBurstStreamed)
	fed     int // frames of the bursts delivered whole
	fedTime time.Duration
	steal   float64 // steal time of CPUs 0 and 1 during the slice, ms
}

func (c crossSlice) mfps() float64   { return float64(c.got) / c.elapsed.Seconds() / 1e6 }
func (c crossSlice) fedPct() float64 { return 100 * float64(c.got) / float64(max(c.offered, 1)) }
func (c crossSlice) fedNs() float64  { return float64(c.fedTime.Nanoseconds()) / float64(max(c.fed, 1)) }
func (c crossSlice) streamedPct() float64 {
	return 100 * float64(c.stream) / float64(max(c.got, 1))
}

// deliverFor delivers f to q again and again for d.
func deliverFor(b *testing.B, q *RxQueue, f *Frames, d time.Duration) crossSlice {
	var c crossSlice
	steal := stealOf01()
	start := time.Now()
	for t0 := start; t0.Sub(start) < d; {
		k, err := q.Deliver(f)
		if err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if k == f.Len() {
			c.fed += k
			c.fedTime += t1.Sub(t0)
		}
		t0 = t1
		c.got += k
		c.stream += q.LastBurstStreamed()
		c.offered += f.Len()
	}
	c.elapsed = time.Since(start)
	c.steal = stealOf01() - steal
	return c
}

// crossLatency is the one-way time of a cache line between CPUs 0 and 1,
// in ns; a probe that fails (a CPU too busy to answer) counts as far.
func crossLatency() float64 {
	ns, err := hostprobe.CrossCPULatency(0, 1)
	if err != nil {
		return farNs
	}
	return ns
}

// stealOf01 is the steal time of CPUs 0 and 1, summed (ms); 0 where it
// cannot be read, which leaves every pair in.
func stealOf01() float64 {
	st, err := hostprobe.StealMs()
	if err != nil {
		return 0
	}
	return st[0] + st[1]
}

func medianOf(pairs []crossPair, v func(crossPair) float64) float64 {
	s := make([]float64, len(pairs))
	for i, p := range pairs {
		s[i] = v(p)
	}
	slices.Sort(s)
	return s[len(s)/2]
}
