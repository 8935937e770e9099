package vhosttest

import (
	"testing"
	"time"
)

// WaitFor polls cond until it holds, and fails the test after Timeout: the
// device answers on its own goroutine, and a test of what it does next
// has to wait for it without sleeping a guess.
func WaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(Timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}
