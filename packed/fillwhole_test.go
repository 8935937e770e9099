package packed_test

import (
	"runtime"
	"testing"

	"github.com/xvswitch/xvswitch/virtq"
	"github.com/xvswitch/xvswitch/virtq/drivertest"
)

// TestFillWholeLines: a Linux guest's receive buffers (the head at the
// start of a line, the frame 12 bytes in) get short frames as whole lines
// where the CPU has streaming stores: head, frame, zeros to the end of the
// last line, nothing after it. A buffer whose last line is not all the
// guest's (its length ends inside it) and a frame too long for two lines
// get head and frame alone. Every frame arrives whole either way.
func TestFillWholeLines(t *testing.T) {
	e := newEnv(t, 256, 0, 1<<20)
	frameLen := func(n int) int { return 1 + n*7%140 }
	whole := 0
	for burst := 0; burst < 8; burst++ { // under 64: no burst is timed, every one streams
		ids, addrs, lens := make([]uint16, 0, virtq.MaxBurst), make([]uint64, 0, virtq.MaxBurst), make([]int, 0, virtq.MaxBurst)
		for i := range virtq.MaxBurst {
			n := burst*virtq.MaxBurst + i
			a, ln := e.bufBase+uint64(n)*256, 256
			if n%5 == 0 {
				ln = virtq.FillHeadLen + frameLen(n)
			}
			b := e.m.Bytes(a, 256)
			for k := range b {
				b[k] = drivertest.Sentinel
			}
			ids = append(ids, mustAdd(e, []drivertest.PackedBuf{{Addr: a, Len: uint32(ln), Write: true}}))
			addrs, lens = append(addrs, a), append(lens, ln)
		}
		j := drivertest.FillJob(virtq.MaxBurst, func(i int) int { return frameLen(burst*virtq.MaxBurst + i) })
		if n, err := e.r.Fill(j); n != virtq.MaxBurst || err != nil {
			t.Fatalf("burst %d: Fill placed %d (%v) of %d", burst, n, err, virtq.MaxBurst)
		}
		wantFilled(t, e, j, ids, addrs)
		for i, a := range addrs {
			if drivertest.WantAfterUsed(t, e.m.Bytes(a, uint64(lens[i])), virtq.FillHeadLen+len(j.Src[i])) {
				whole++
			}
			drivertest.WantUntouched(t, e.m.Bytes(a+uint64(lens[i]), uint64(256-lens[i])))
		}
	}
	if runtime.GOARCH == "amd64" && whole == 0 {
		t.Error("no buffer written as whole lines")
	}
}
