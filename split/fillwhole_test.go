package split_test

import (
	"runtime"
	"testing"

	"github.com/xvswitch/xvswitch/virtq"
	"github.com/xvswitch/xvswitch/virtq/drivertest"
)

// TestSplitFillWholeLines: as the packed ring's TestFillWholeLines, a
// Linux guest's receive buffers get short frames as whole lines where the
// CPU has streaming stores, and nothing is written past the end of a
// frame's last line or of the buffer.
func TestSplitFillWholeLines(t *testing.T) {
	e := newFillEnv(t, 256)
	frameLen := func(n int) int { return 1 + n*7%140 }
	whole := 0
	for burst := 0; burst < 8; burst++ { // under 64: no burst is timed, every one streams
		heads, addrs, lens := make([]uint16, 0, virtq.MaxBurst), make([]uint64, 0, virtq.MaxBurst), make([]int, 0, virtq.MaxBurst)
		for i := range virtq.MaxBurst {
			n := burst*virtq.MaxBurst + i
			a, ln := e.buf+uint64(n)*256, 256
			if n%5 == 0 {
				ln = virtq.FillHeadLen + frameLen(n)
			}
			b := e.m.Bytes(a, 256)
			for k := range b {
				b[k] = drivertest.Sentinel
			}
			heads = append(heads, e.post(a, uint32(ln)))
			addrs, lens = append(addrs, a), append(lens, ln)
		}
		j := drivertest.FillJob(virtq.MaxBurst, func(i int) int { return frameLen(burst*virtq.MaxBurst + i) })
		if n, err := e.r.Fill(j); n != virtq.MaxBurst || err != nil {
			t.Fatalf("burst %d: Fill placed %d (%v) of %d", burst, n, err, virtq.MaxBurst)
		}
		e.wantFilled(j, heads, addrs)
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
