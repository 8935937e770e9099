package packed_test

import (
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
	drivertest.CheckWholeLines(t, e.m, e.bufBase,
		func(a uint64, ln uint32) uint16 {
			return mustAdd(e, []drivertest.PackedBuf{{Addr: a, Len: ln, Write: true}})
		},
		e.r.Fill,
		func(j *virtq.FillJob, ids []uint16, addrs []uint64) { wantFilled(t, e, j, ids, addrs) })
}
