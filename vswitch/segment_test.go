package vswitch

import (
	"testing"

	"github.com/xvswitch/xvswitch/virtionet"
)

// countingSender is an egress that counts what it is given.
type countingSender struct{ frames, bytes int }

func (s *countingSender) sendAsIs(b *Burst, m Mask, c *Counts) {
	for rest := m; rest != 0; rest &= rest - 1 {
		s.frames++
		s.bytes += b.Frame(rest.Lowest()).Len()
	}
	c.Frames(uint64(m.Count()), 0)
}

// TestFinishingAllocatesNothing: once a queue's scratch exists, finishing
// TSO frames and partial checksums costs no allocation per frame, and
// plain frames pass in one call.
func TestFinishingAllocatesNothing(t *testing.T) {
	payload := make([]byte, 64000)
	big, h := tsoFrame(2, 1, payload, 1448)
	small, hs := tsoFrame(2, 1, payload[:1000], 0)
	var b Burst
	b.SetOne(0, big)
	b.SetOffload(0, virtionet.MakeOffload(h))
	b.SetOne(1, small)
	b.SetOffload(1, virtionet.MakeOffload(hs))
	b.SetOne(2, small) // plain
	var fin *finisher
	var s countingSender
	var c Counts
	run := func() { transmitFinishing(&fin, &b, 0b111, &c, virtionet.Offloads{}, &s) }
	run()
	if want := 45 + 1 + 1; s.frames != want || c.segmentCopies != 44 {
		t.Fatalf("sent %d frames, %d segment copies", s.frames, c.segmentCopies)
	}
	if a := testing.AllocsPerRun(50, run); a != 0 {
		t.Fatalf("%v allocations per burst", a)
	}
	// A receiver that takes everything gets the frames as they are.
	s = countingSender{}
	all := virtionet.OffloadsOf(featTxOffloads | featRxOffloads)
	transmitFinishing(&fin, &b, 0b111, &c, all, &s)
	if s.frames != 3 {
		t.Fatalf("accepting receiver got %d frames", s.frames)
	}
}
