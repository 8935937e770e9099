package packed

import (
	"testing"

	"github.com/xvswitch/xvswitch/guestmem"
)

// TestStreams: which frames a Fill streams: 64 to streamMax bytes starting
// a cache line, and no other (the bytes themselves: guestmem's
// TestCopyStream, and TestFillRounds, whose odd rounds lay buffers out as
// DPDK's driver does).
func TestStreams(t *testing.T) {
	back := make([]byte, 1024)
	var at int
	for !guestmem.StartsLine(back[at:]) {
		at++
	}
	src := make([]byte, 300)
	for _, off := range []int{0, 12, 52} {
		dst := back[at+off:]
		for l := 0; l <= len(src); l++ {
			want := off == 0 && l >= 64 && l <= streamMax
			if got := streams(dst, src[:l]); got != want {
				t.Fatalf("frame of %d bytes at %d into a line: streams %v, want %v", l, off, got, want)
			}
		}
	}
}
