package vhost_test

import (
	"testing"

	"github.com/xvswitch/xvswitch/vhost"
	"github.com/xvswitch/xvswitch/vhost/vhosttest"
)

// BenchmarkBeginEnd is the data path's per-burst cost of the handoff: one
// Begin/End pair on a running queue.
func BenchmarkBeginEnd(b *testing.B) {
	s := startSession(b, vhost.Config{}, true, vhosttest.DefaultFeatures)
	q := s.d.TxQueue(0)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if q.Begin() != nil {
			q.End()
		}
	}
}

// BenchmarkEmptyPoll is a poll of an empty guest TX queue: Begin, Receive
// (nothing there), End, as an idle-but-spinning worker does.
func BenchmarkEmptyPoll(b *testing.B) {
	s := startSession(b, vhost.Config{}, true, vhosttest.DefaultFeatures)
	q := s.d.TxQueue(0)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if a := q.Begin(); a != nil {
			_, _ = a.Tx.Receive(32)
			q.End()
		}
	}
}
