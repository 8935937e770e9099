package drivertest

import (
	"runtime"
	"testing"

	"github.com/xvswitch/xvswitch/guestmem"
	"github.com/xvswitch/xvswitch/virtq"
)

// Sentinel is what the whole-line tests fill receive buffers with before
// a Fill, to see what the Fill wrote after the used length.
const Sentinel = 0xa5

// WantAfterUsed checks receive buffer b (the whole buffer the driver
// posted, filled with Sentinel before the Fill) after the used length
// used: a Filler that wrote it as whole lines (virtq.StreamsWhole: where
// the CPU has streaming stores, a buffer that starts a line, used at most
// virtq.WholeMax, the buffer holding its last line whole) wrote zeros up
// to the end of used's last line and nothing after it; any other write
// ends at used. Reports whether b was written whole.
func WantAfterUsed(t testing.TB, b []byte, used int) bool {
	t.Helper()
	end := (used + guestmem.CacheLine - 1) &^ (guestmem.CacheLine - 1)
	whole := runtime.GOARCH == "amd64" && guestmem.StartsLine(b) && used <= virtq.WholeMax && len(b) >= end
	if !whole {
		end = used
	}
	for i := used; i < len(b); i++ {
		if want := byte(Sentinel); i < end && b[i] != 0 || i >= end && b[i] != want {
			t.Fatalf("buffer of %d bytes, %d used, whole lines %v: byte %d is %#x", len(b), used, whole, i, b[i])
		}
	}
	return whole
}

// WantUntouched checks that b, filled with Sentinel before a Fill, still
// is: memory past a buffer.
func WantUntouched(t testing.TB, b []byte) {
	t.Helper()
	for i, c := range b {
		if c != Sentinel {
			t.Fatalf("byte %d past the buffer is %#x", i, c)
		}
	}
}

// CheckWholeLines runs a Filler over 8 bursts of MaxBurst buffers laid out
// as a Linux guest's (the header starting a line), 2048 bytes apart from
// base in m, every fifth one exactly as long as its header and frame (so
// that its last line is not all the guest's), with frames of 1 to 140
// bytes and, every ninth, of 1300 to 1499: post adds a writable buffer
// and returns its id, fill runs the Fill, reaped checks that the driver
// got the frames of j in the buffers ids at addrs. Every buffer must hold
// what WantAfterUsed says, nothing past a buffer may change, and where the
// CPU has streaming stores some buffers must have gone as whole lines.
// Under 64 bursts, none is timed: every one goes the way a new ring starts
// with, streaming, which streams the long frames' first lines too.
func CheckWholeLines(t testing.TB, m *Mem, base uint64, post func(addr uint64, ln uint32) uint16, fill func(*virtq.FillJob) (int, error), reaped func(j *virtq.FillJob, ids []uint16, addrs []uint64)) {
	t.Helper()
	const apart = 2048
	frameLen := func(n int) int {
		if n%9 == 4 {
			return 1300 + n%200
		}
		return 1 + n*7%140
	}
	whole := 0
	for burst := 0; burst < 8; burst++ {
		ids, addrs, lens := make([]uint16, 0, virtq.MaxBurst), make([]uint64, 0, virtq.MaxBurst), make([]int, 0, virtq.MaxBurst)
		for i := range virtq.MaxBurst {
			n := burst*virtq.MaxBurst + i
			a, ln := base+uint64(n)*apart, apart
			if n%5 == 0 {
				ln = virtq.FillHeadLen + frameLen(n)
			}
			b := m.Bytes(a, apart)
			for k := range b {
				b[k] = Sentinel
			}
			ids = append(ids, post(a, uint32(ln)))
			addrs, lens = append(addrs, a), append(lens, ln)
		}
		j := FillJob(virtq.MaxBurst, func(i int) int { return frameLen(burst*virtq.MaxBurst + i) })
		if n, err := fill(j); n != virtq.MaxBurst || err != nil {
			t.Fatalf("burst %d: Fill placed %d (%v) of %d", burst, n, err, virtq.MaxBurst)
		}
		reaped(j, ids, addrs)
		for i, a := range addrs {
			if WantAfterUsed(t, m.Bytes(a, uint64(lens[i])), virtq.FillHeadLen+len(j.Src[i])) {
				whole++
			}
			WantUntouched(t, m.Bytes(a+uint64(lens[i]), uint64(apart-lens[i])))
		}
	}
	if runtime.GOARCH == "amd64" && whole == 0 {
		t.Error("no buffer written as whole lines")
	}
}
