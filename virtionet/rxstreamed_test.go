package virtionet

import (
	"math/rand"
	"runtime"
	"testing"
)

// TestRxLastBurstStreamed: LastBurstStreamed counts the frames of a
// Deliver that its ring's Filler wrote with streaming stores, so that the
// switch can say per port how a guest's frames went (the path counters'
// streamed_frames). A new ring streams until it has measured: frames into
// a Linux guest's buffers (the header starting a line) stream on both
// rings (short ones whole, long ones their first line), short frames into
// a DPDK guest's (the frame starting a line) on the packed ring alone,
// long frames into those never.
func TestRxLastBurstStreamed(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	for _, k := range kinds {
		for _, tc := range []struct {
			layout   string
			headAt   func(*guest) uint64
			frameLen int
			want     int // frames streamed of 8, where the CPU has streaming stores
		}{
			{"linux", func(g *guest) uint64 { return g.m.Alloc(1, 2048, 64) }, 64, 8},
			{"mbuf", func(g *guest) uint64 { return g.m.Alloc(1, 2048+128, 128) + 128 - HeaderLen }, 64, map[ringKind]int{kindPacked: 8, kindSplit: 0}[k]},
			{"linux, long frames", func(g *guest) uint64 { return g.m.Alloc(1, 2048, 64) }, 1500, 8},
			{"mbuf, long frames", func(g *guest) uint64 { return g.m.Alloc(1, 2048+128, 128) + 128 - HeaderLen }, 1500, 0},
		} {
			t.Run(k.String()+"/"+tc.layout, func(t *testing.T) {
				g := newGuest(t, k, 64, 0)
				for range 8 {
					g.add([]buf{{Addr: tc.headAt(g), Len: 2048, Write: true}})
				}
				q := NewRxQueue(g.ring, QueueConfig{Features: featV1 | featMrg})
				f := &Frames{}
				for range 8 {
					f.AddBytes(frame(rng, tc.frameLen))
				}
				if n, err := q.Deliver(f); n != 8 || err != nil {
					t.Fatalf("Deliver: %d, %v", n, err)
				}
				want := tc.want
				if runtime.GOARCH != "amd64" {
					want = 0
				}
				if got := q.LastBurstStreamed(); got != want {
					t.Errorf("LastBurstStreamed %d, want %d", got, want)
				}
				if cs := g.reap(); len(cs) != 8 {
					t.Fatalf("reaped %d, want 8", len(cs))
				}
			})
		}
	}
}
