package virtionet

import (
	"math/rand"
	"slices"
	"testing"
)

// TestFramesSummaries: what Frames keeps about all its frames holds for
// tables built by every way Frames offers (Add, AddBytes, AddOffload with
// GSO frames, Set from 0, SetOffload, Exchange with another table, Reset),
// frames from runts to over any limit: Plain only when no frame carries
// offload metadata. And estimate's short answer (every frame fits one
// buffer, known from the longest frame) is the answer estimateEach gets by
// looking at each frame's limits, for
// queues with and without MRG_RXBUF, various MTUs and last-seen buffer
// sizes.
func TestFramesSummaries(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	buf := make([]byte, MaxGSOFrameLen+100)
	length := func() int {
		switch rng.Intn(5) {
		case 4: // the limits' edges
			return []int{MaxFrameLen(1500), MaxFrameLen(1500) + 1, 9018, 9019, 1526 - HeaderLen, 2048 - HeaderLen + 1, MaxGSOFrameLen}[rng.Intn(7)]
		case 0:
			return 1 + rng.Intn(64)
		case 1:
			return 60 + rng.Intn(1500)
		case 2:
			return 1400 + rng.Intn(9100)
		}
		return rng.Intn(len(buf))
	}
	var f, g Frames
	shortcuts, plain := 0, 0
	for round := range 20000 {
		if rng.Intn(3) == 0 {
			f.Reset()
		}
		switch rng.Intn(7) {
		case 0:
			f.Add([][]byte{buf[:length()]})
		case 1:
			f.AddBytes(buf[:length()])
		case 2:
			n := length()
			f.AddOffload([][]byte{buf[:n]}, n, Offload{lo: GSOTCPv4 << 8})
		case 3:
			i := rng.Intn(min(f.n+1, len(f.lens)))
			n := length()
			f.Set(i, [][]byte{buf[:n]}, n)
		case 4:
			if g.n == 0 || rng.Intn(4) == 0 {
				g.Reset()
				for range 1 + rng.Intn(32) {
					g.AddBytes(buf[:length()])
				}
			}
			if i := rng.Intn(min(f.n, g.n) + 1); i < min(f.n, g.n) {
				f.Exchange(i, &g)
			}
		case 5:
			if f.n > 0 {
				f.SetOffload(rng.Intn(f.n), Offload{lo: uint64(rng.Intn(2)) * GSOTCPv4 << 8})
			}
		default:
			for f.n < 1+rng.Intn(32) {
				f.AddBytes(buf[:length()])
			}
		}
		if f.Plain() {
			plain++
			for i, o := range f.off[:f.n] {
				if !o.IsZero() {
					t.Fatalf("round %d: Plain with frame %d carrying %+v", round, i, o)
				}
			}
		}
		if f.n == 0 {
			continue
		}
		feat := uint64(featV1)
		if rng.Intn(2) == 0 {
			feat |= featMrg
		}
		q := NewRxQueue(nil, QueueConfig{Features: feat, MaxFrame: []int{0, 1518, 9018, MaxGSOFrameLen + 50}[rng.Intn(4)]})
		q.chainLen = []int{0, 1526, 2048, 4096, 65562}[rng.Intn(5)]
		i := rng.Intn(f.n)
		got, want := q.estimate(&f, i), q.estimateEach(&f, i)
		if got != want {
			t.Fatalf("round %d: estimate(%d) = %d, estimateEach %d (lens %v, mrg %v, maxFrame %d, chainLen %d)",
				round, i, got, want, f.lens[:f.n], q.mrg, q.maxFrame, q.chainLen)
		}
		if l := slices.Max(f.lens[i:f.n]); l <= min(q.maxFrame, MaxGSOFrameLen) && (!q.mrg || q.chainLen <= 0 || q.hdrLen+l <= q.chainLen) {
			shortcuts++
		}
	}
	if plain < 1000 || plain > 19000 {
		t.Fatalf("%d of 20000 rounds had a plain table: the test does not exercise both answers", plain)
	}
	if shortcuts < 1000 {
		t.Fatalf("only %d of 20000 rounds took the shortcut: the test does not exercise it", shortcuts)
	}
}
