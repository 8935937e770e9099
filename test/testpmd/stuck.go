package testpmd

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// kill ends a testpmd that neither "quit" nor SIGINT ended, and returns
// how. It waits for the process's Wait to return, but not forever: caught
// here twice (2026-12-07), a testpmd that had printed "Bye..." was gone
// (no task in /proc, SIGINT and SIGKILL refused as sent to a finished
// process) while Wait, in waitid on its pidfd, did not return for
// minutes; the test waited with it. Whatever reaped it, the test goes on,
// and Stuck says what was seen.
func (tp *Process) kill(exited func(time.Duration) bool) string {
	err := tp.cmd.Process.Kill()
	wait := killWait
	if err != nil {
		wait = goneWait // the kernel says it is gone already
	}
	if exited(wait) {
		return "SIGKILL"
	}
	how := fmt.Sprintf("SIGKILL (%v), and its Wait not returned %v later: %s", err, wait, tasksOf(tp.cmd.Process.Pid))
	tp.mu.Lock()
	tp.Stuck = how
	tp.mu.Unlock()
	return how
}

// killWait is how long kill waits after SIGKILL for a process that was
// still there; goneWait, for one the kernel said was gone.
const (
	killWait = 30 * time.Second
	goneWait = 2 * time.Second
)

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
