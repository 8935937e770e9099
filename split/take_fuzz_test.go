package split_test

import (
	"testing"

	"github.com/xvswitch/xvswitch/split"
	"github.com/xvswitch/xvswitch/virtq"
)

// checkTake takes up to a burst from a twin of the fuzzed ring (state
// state) and pops another twin one chain at a time: every chain Take took
// must be the chain Pop gives at its place, one readable descriptor of
// that head whose one segment is the buffer Take gave; and the twin's next
// Pop, after the Take, must give what popping on one by one gives next, or
// fail the same way (Take left it untouched), and find nothing when Take
// said so (More false).
func checkTake(t *testing.T, cfg virtq.Config, state uint32, j *virtq.TakeJob, b, ref *virtq.Burst) {
	t.Helper()
	cfg.Base = state
	taker, err := split.New(cfg)
	if err != nil {
		t.Fatalf("twin from state %d: %v", state, err)
	}
	one, err := split.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	k := taker.Take(j, virtq.MaxBurst)
	if k < 0 || k > virtq.MaxBurst || taker.InFlight() != k {
		t.Fatalf("Take took %d, %d in flight", k, taker.InFlight())
	}
	for i := 0; i < k; i++ {
		n, err := one.Pop(ref, 1)
		if n != 1 || err != nil {
			t.Fatalf("taken %d: one by one: %d, %v", i, n, err)
		}
		c, buf := ref.Chains[0], j.Bufs[i]
		r := ref.Readable(0)
		if j.Used[i] != (virtq.Used{ID: c.ID, Descs: 1}) || c.Descs != 1 || c.WriteLen != 0 || c.Malformed ||
			len(r) != 1 || len(r[0]) != len(buf) || &r[0][0] != &buf[0] || cap(buf) != len(buf) {
			t.Fatalf("taken %d: %+v, %d bytes; one by one %+v", i, j.Used[i], len(buf), c)
		}
	}
	if k == virtq.MaxBurst {
		return
	}
	n, err := taker.Pop(b, 1)
	if !j.More && (n != 0 || err != nil) {
		t.Fatalf("Take took %d and said Pop finds nothing; Pop: %d, %v", k, n, err)
	}
	rn, rerr := one.Pop(ref, 1)
	if (err == nil) != (rerr == nil) || specific(err) != specific(rerr) || n != rn {
		t.Fatalf("Pop after a Take of %d: %d, %v; one by one: %d, %v", k, n, err, rn, rerr)
	}
	if n == 1 && (b.Chains[0].ID != ref.Chains[0].ID || b.Chains[0].ReadLen != ref.Chains[0].ReadLen || b.Chains[0].WriteLen != ref.Chains[0].WriteLen) {
		t.Fatalf("Pop after a Take of %d: %+v; one by one %+v", k, b.Chains[0], ref.Chains[0])
	}
}
