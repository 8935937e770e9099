package virtionet

import (
	"testing"

	"github.com/xvswitch/xvswitch/test/inlining"
)

// TestHotHelpersInline: the helpers the data path calls per frame or per
// descriptor must stay small enough for Go's inliner (a call costs more
// than most of them). The compiler's own report (-gcflags=-m) is the proof.
func TestHotHelpersInline(t *testing.T) {
	inlining.Check(t, "(*RxQueue).fastFrame", "(*Frames).rxHeader", "(*RxQueue).left", "(*RxQueue).avail", "(*Frames).set", "(*Frames).addOne", "(*counters).publish", "storeIfChanged", "(*queueBase).LastBurstDrops", "(*queueBase).LastBurstPassed", "(*rxBackoff).holding")
}
