package guestmem

import (
	"testing"

	"github.com/xvswitch/xvswitch/test/inlining"
)

// TestHotHelpersInline: the helpers the data path calls per frame or per
// descriptor must stay small enough for Go's inliner (a call costs more
// than most of them). The compiler's own report (-gcflags=-m) is the proof.
func TestHotHelpersInline(t *testing.T) {
	inlining.Check(t, "(*Hint).Hinted", "Copy", "LoadAcquire32", "StoreRelease32", "Load16", "Store16", "Fence",
		"(*StreamChoice).Begin", "(*StreamChoice).Streams", "(*StreamChoice).Restart", "(*StreamChoice).End") // per burst, in both rings' Fill
}
