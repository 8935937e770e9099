package testpmd

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// killWait is how long stop waits for testpmd to go after SIGKILL. A
// process that SIGKILL does not end within it has a task stuck in the
// kernel (seen here: a testpmd that had printed "Bye..." and closed its
// ports took minutes to go, and the test waited on it); the test goes on
// without it, and says what its tasks were doing.
const killWait = 30 * time.Second

// tasksOf describes what pid's tasks are doing, from /proc: each task's
// name, state, wait channel and the innermost frames of its kernel stack
// (readable by root).
func tasksOf(pid int) string {
	dirs, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*", pid))
	if len(dirs) == 0 {
		return fmt.Sprintf("pid %d: no tasks in /proc", pid)
	}
	var b strings.Builder
	for _, d := range dirs {
		comm, _ := os.ReadFile(filepath.Join(d, "comm"))
		wchan, _ := os.ReadFile(filepath.Join(d, "wchan"))
		state := "?"
		if stat, err := os.ReadFile(filepath.Join(d, "stat")); err == nil {
			// The state follows the name, which is in parentheses and may hold spaces.
			if i := strings.LastIndexByte(string(stat), ')'); i >= 0 && i+2 < len(stat) {
				state = string(stat[i+2])
			}
		}
		fmt.Fprintf(&b, "[task %s %q state %s wchan %s", filepath.Base(d), strings.TrimSpace(string(comm)), state, wchan)
		if stack, err := os.ReadFile(filepath.Join(d, "stack")); err == nil {
			lines := strings.Split(strings.TrimSpace(string(stack)), "\n")
			fmt.Fprintf(&b, " stack %s", strings.Join(lines[:min(len(lines), 4)], " < "))
		}
		b.WriteString("] ")
	}
	return strings.TrimSpace(b.String())
}
