package vswitch

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/xvswitch/xvswitch/portspec"

	"github.com/xvswitch/xvswitch/vhost/vhosttest"
)

// BenchmarkVhostEmptyPoll is what a worker pays per poll of a connected
// guest's TX queue when the guest sent nothing: the cost of every spin of
// an idle-but-awake worker, and part of every busy one.
func BenchmarkVhostEmptyPoll(b *testing.B) {
	for _, packed := range []bool{true, false} {
		b.Run(ringName(packed), func(b *testing.B) {
			s, err := New(Config{Workers: 1, Ctl: "x"})
			if err != nil {
				b.Fatal(err)
			}
			path := filepath.Join(b.TempDir(), "g.sock")
			if err := s.AddVhost(portspec.Vhost{Name: "g", Path: path, Queues: 1}); err != nil {
				b.Fatal(err)
			}
			defer s.removeAll()
			fe := vhosttest.Dial(b, path)
			fe.Start(vhosttest.Options{Packed: packed})
			for deadline := time.Now().Add(5 * time.Second); portState(s, "g") != "ready"; time.Sleep(time.Millisecond) {
				if time.Now().After(deadline) {
					b.Fatal("the guest never got ready")
				}
			}
			w := s.workers[0]
			snap := s.snap.Load()
			in := snap.polls[0][0]
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if n, err := w.forwardSafe(snap, in); n != 0 || err != nil {
					b.Fatalf("polled %d, %v", n, err)
				}
			}
			b.StopTimer()
			if h, ok := in.q.(interface{ letGo(int) }); ok {
				h.letGo(0) // so that removeAll finds the queue free
			}
		})
	}
}
