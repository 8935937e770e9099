package xsk

import (
	"sync/atomic"
	"testing"
	"time"
)

const benchFrameLen = 64 // 60 bytes + FCS on a real wire; 64 here

// BenchmarkRX: frames per second received through one copy-mode socket on
// the veth's outer end. The generator is an AF_XDP socket on the inner end
// transmitting 64-byte frames as fast as it can in another goroutine.
func BenchmarkRX(b *testing.B) {
	p := newPair(b, SocketConfig{NoTX: true, RXSize: 4096, FillSize: 4096, Frames: 8192})
	frames := make([][]byte, MaxBurst)
	for i := range frames {
		frames[i] = udpFrame(benchFrameLen, uint16(1000+i), 0xbe7c4)
	}
	var stop atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		for !stop.Load() {
			if _, err := p.gen.Complete(); err != nil {
				b.Error(err)
				return
			}
			if _, err := p.gen.Transmit(frames); err != nil {
				b.Error(err)
				return
			}
		}
	}()
	defer func() { stop.Store(true); <-done }()
	var descs [MaxBurst]Desc
	b.ResetTimer()
	start := time.Now()
	for got := 0; got < b.N; {
		n := p.rx.Receive(descs[:])
		got += n
		p.rx.Release(descs[:n])
	}
	el := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/el.Seconds(), "pps")
	st, _ := p.rx.Stats()
	// Frames the kernel could not deliver (fill ring empty, RX ring full)
	// per frame received: how far the receiver fell behind the generator.
	b.ReportMetric(float64(st.RXDropped+st.RXRingFull)/float64(b.N), "drops/frame")
	b.Logf("N=%d rx %+v kernel %+v", b.N, p.rx.Counters(), st)
}

// BenchmarkTX: frames per second transmitted (completed) through one
// copy-mode socket on the veth's outer end; the inner end drops them in
// XDP so the receiving side costs little.
func BenchmarkTX(b *testing.B) {
	p := newPair(b, SocketConfig{NoRX: true, TXSize: 2048, CompletionSize: 2048, Frames: 4096})
	attachInNS(b, p.v, xdpDrop(b))
	frames := make([][]byte, MaxBurst)
	for i := range frames {
		frames[i] = udpFrame(benchFrameLen, uint16(1000+i), 0xbe7c4)
	}
	s := p.rx
	b.ResetTimer()
	start := time.Now()
	transmitAll(b, s, frames)
	el := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/el.Seconds(), "pps")
	st, _ := s.Stats()
	b.Logf("N=%d tx budget %d counters %+v kernel %+v", b.N, s.TXBudget(), s.Counters(), st)
}

// transmitAll sends b.N frames through s in bursts of frames, and waits
// for every completion.
func transmitAll(b *testing.B, s *Socket, frames [][]byte) {
	for sent := 0; sent < b.N; {
		if _, err := s.Complete(); err != nil {
			b.Fatal(err)
		}
		n, err := s.Transmit(frames[:min(len(frames), b.N-sent)])
		if err != nil {
			b.Fatal(err)
		}
		sent += n
	}
	for s.TXOutstanding() > 0 {
		if _, err := s.Complete(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBurstOverhead measures what xsk itself costs per frame, without
// a kernel: fake rings, the benchmark plays the kernel with plain index
// moves. One op is one frame received, released, copied out and completed.
func BenchmarkBurstOverhead(b *testing.B) {
	s := fakeSocket(b, UMEMConfig{FrameSize: 2048, NumFrames: 2048},
		SocketConfig{RXSize: 256, TXSize: 256, FillSize: 256, CompletionSize: 256, Frames: 1024})
	frames := make([][]byte, MaxBurst)
	for i := range frames {
		frames[i] = udpFrame(benchFrameLen, uint16(1000+i), 1)
	}
	var descs [MaxBurst]Desc
	b.ReportAllocs()
	b.ResetTimer()
	for done := 0; done < b.N; done += MaxBurst {
		// Kernel: 32 fill entries become 32 received frames.
		fc, rp := s.fill.consumer.Load(), s.rx.producer.Load()
		for i := range uint32(MaxBurst) {
			s.rx.slots[(rp+i)&s.rx.mask] = unixDesc(s.fill.slots[(fc+i)&s.fill.mask]+256, benchFrameLen)
		}
		s.fill.consumer.Store(fc + MaxBurst)
		s.rx.producer.Store(rp + MaxBurst)

		n := s.Receive(descs[:])
		s.Release(descs[:n])
		if _, err := s.Transmit(frames); err != nil {
			b.Fatal(err)
		}

		// Kernel: consume the TX ring, complete everything.
		tc, tp := s.tx.consumer.Load(), s.tx.producer.Load()
		cp := s.comp.producer.Load()
		for i := uint32(0); tc+i != tp; i++ {
			s.comp.slots[(cp+i)&s.comp.mask] = s.tx.slots[(tc+i)&s.tx.mask].Addr
		}
		s.tx.consumer.Store(tp)
		s.comp.producer.Store(cp + (tp - tc))
		s.Complete()
	}
}
