package split_test

import (
	"testing"

	"github.com/xvswitch/xvswitch/virtq/drivertest"
)

// TestSplitFillWholeLines: as the packed ring's TestFillWholeLines, a
// Linux guest's receive buffers get short frames as whole lines where the
// CPU has streaming stores, and nothing is written past the end of a
// frame's last line or of the buffer.
func TestSplitFillWholeLines(t *testing.T) {
	e := newFillEnv(t, 256)
	drivertest.CheckWholeLines(t, e.m, e.buf, e.post, e.r.Fill, e.wantFilled)
}
