package testpmd

import (
	"os"
	"strings"
	"testing"
)

// TestTasksOf: what stop says of a testpmd that SIGKILL did not end names
// each task of the process with its state (here: this test binary's), and
// says so when the process has no tasks left.
func TestTasksOf(t *testing.T) {
	got := tasksOf(os.Getpid())
	if n := strings.Count(got, "[task "); n < 2 || !strings.Contains(got, " state ") || !strings.Contains(got, "testpmd.test") {
		t.Errorf("tasksOf(self) = %q: want every task (a Go binary has several), named, with its state", got)
	}
	if got := tasksOf(1 << 30); !strings.Contains(got, "no tasks") {
		t.Errorf("tasksOf(no such pid) = %q", got)
	}
}
