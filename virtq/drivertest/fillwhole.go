package drivertest

import (
	"runtime"
	"testing"
	"unsafe"

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
	end := (used + 63) &^ 63
	whole := runtime.GOARCH == "amd64" && uintptr(unsafe.Pointer(unsafe.SliceData(b)))&63 == 0 && used <= virtq.WholeMax && len(b) >= end
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
