package xsk

import "testing"

// The userspace cost of one 32-frame TX burst of 1514-byte frames, the
// kernel played by the test (fake rings, no syscall): copied into the
// socket's frames (Transmit, the copy path) against sent from the
// caller's memory by address (TransmitAt, the zero-copy path). The
// kernel's own cost (its copy into an skb in copy mode) is not in it.
func BenchmarkTXBurst1514(b *testing.B) {
	const n, size = 32, 1514
	b.Run("copy", func(b *testing.B) {
		s := fakeSocket(b, UMEMConfig{FrameSize: 2048, NumFrames: 256},
			SocketConfig{NoRX: true, TXSize: 64, CompletionSize: 64, Frames: 64})
		src := make([]byte, n*size)
		frames := make([][]byte, n)
		for i := range frames {
			frames[i] = src[i*size : (i+1)*size]
		}
		addrs := make([]uint64, n)
		b.SetBytes(n * size)
		b.ReportAllocs()
		for b.Loop() {
			s.Transmit(frames)
			k := kernelTXInto(s, addrs)
			kernelCompleteKeys(s, addrs[:k])
			s.Complete()
		}
	})
	b.Run("at", func(b *testing.B) {
		s := fakeSocket(b, UMEMConfig{FrameSize: 2048, NumFrames: 256, Unaligned: true},
			SocketConfig{NoRX: true, CallerTX: true, TXSize: 64, CompletionSize: 64, Frames: 4})
		descs := make([]Desc, n)
		for i := range descs {
			descs[i] = Desc{uint64(8192 + i*2048 + 12), size}
		}
		keys := make([]uint64, n)
		b.SetBytes(n * size)
		b.ReportAllocs()
		for b.Loop() {
			s.TransmitAt(descs)
			k := kernelTXInto(s, keys)
			kernelCompleteKeys(s, keys[:k])
			s.CompleteAt(keys)
		}
	})
}
