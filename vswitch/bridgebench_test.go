package vswitch

import "testing"

// BenchmarkBridgeVsXConnect forwards bursts of 32 frames from a fake port
// to a sink, once over the learning bridge (learn the source, look up the
// destination) and once over a cross-connect (no FDB at all). The
// difference of their ns/frame is what the bridge costs per frame.
func BenchmarkBridgeVsXConnect(b *testing.B) {
	for _, mode := range []string{"xconnect", "bridge", "bridge-2flows"} {
		b.Run(mode, func(b *testing.B) {
			r := newBurstRig(b)
			switch mode {
			case "xconnect":
				r.s.ports[0].peer.Store(2)
				r.s.ports[1].peer.Store(1)
			case "bridge-2flows":
				// Frames alternate between two flows: the previous
				// frame's MACs never match.
				for i := range r.frames {
					if i%2 == 1 {
						r.frames[i] = ethFrame(0x0200_0000_0003, 0x0200_0000_0004, "0123456789012345678901234567890123456789012345678901")
					}
				}
				r.s.fdb.AddStatic(0x0200_0000_0003, 1)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if n := r.burst(); n != MaxBurst {
					b.Fatalf("forwarded %d", n)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*MaxBurst), "ns/frame")
			if r.sink.n != b.N*MaxBurst {
				b.Fatalf("sink got %d of %d frames", r.sink.n, b.N*MaxBurst)
			}
		})
	}
}
