package split_test

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/xvswitch/xvswitch/split"
	"github.com/xvswitch/xvswitch/virtq"
	"github.com/xvswitch/xvswitch/virtq/drivertest"
)

// checkFill fills up to MaxBurst frames through a twin of the fuzzed ring
// (made from its state), reads back the used elements it wrote, puts guest
// memory back as it was, and pops the same ring one chain at a time: every
// frame Fill placed must have gone into a chain Pop takes, one writable
// buffer of that head long enough for header and frame, used with header
// plus frame as its length; a Fill that fails the ring must have found a
// head that Pop refuses. Where a header Fill wrote lies on the rings (a
// hostile driver's buffer over its own descriptors or avail ring), what
// Fill read after it differs from what Pop reads: the comparison stops.
func checkFill(t *testing.T, m *drivertest.Mem, cfg virtq.Config, state uint32, rings []byte, job *virtq.FillJob, ref *virtq.Burst) {
	t.Helper()
	snap := m.Snapshot()
	cfg.Base = state
	fr, err := split.New(cfg)
	if err != nil {
		t.Fatalf("twin from state %d: %v", state, err)
	}
	var frame [200]byte
	job.N = virtq.MaxBurst
	for i := range job.N {
		job.Src[i] = frame[:1+(i*23)%len(frame)]
		job.Head[i] = virtq.FillHead{Lo: uint64(i), Hi: uint32(i)}
	}
	usedRing := m.Bytes(fuzzUsed, 4+8*uint64(cfg.Size))
	u0 := binary.LittleEndian.Uint16(usedRing[2:])
	n, ferr := fr.Fill(job)
	if n < 0 || n > job.N || (ferr != nil && n != 0) {
		t.Fatalf("Fill: %d, %v", n, ferr)
	}
	if ferr != nil && (!errors.Is(ferr, virtq.ErrBroken) || !errors.Is(ferr, virtq.ErrBadID)) {
		t.Fatalf("Fill: %v, want ErrBadID and ErrBroken", ferr)
	}
	if u := binary.LittleEndian.Uint16(usedRing[2:]); u != u0+uint16(n) {
		t.Fatalf("used index %d -> %d after a Fill of %d", u0, u, n)
	}
	ids := make([]uint16, n)
	for i := range ids {
		e := binary.LittleEndian.Uint64(usedRing[4+8*int((u0+uint16(i))&(cfg.Size-1)):])
		ids[i] = uint16(e)
		if uint32(e) >= uint32(cfg.Size) || uint32(e>>32) != uint32(virtq.FillHeadLen+len(job.Src[i])) {
			t.Fatalf("used element %d: %#x", i, e)
		}
	}
	for i, r := range m.Regions {
		copy(r.Host, snap[i])
	}
	rr, err := split.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	drivertest.CheckFillAsPops(t, job, n, ids, ferr, func() (int, *virtq.Burst, error) {
		k, err := rr.Pop(ref, 1)
		return k, ref, err
	}, rings)
}
