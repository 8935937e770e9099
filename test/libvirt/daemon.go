package libvirt

import (
	"bytes"
	"os/exec"
	"runtime"
	"syscall"
	"testing"
	"time"
)

// startDaemon runs a libvirt daemon in the foreground for the rest of the
// test, its output in the test log if the test fails. Pdeathsig kills it
// if the test binary dies; it fires when the forking thread exits, so the
// daemon is started and waited for on one locked thread.
func startDaemon(t testing.TB, name string) {
	t.Helper()
	var out bytes.Buffer
	cmd := exec.Command(name)
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	started, exited := make(chan error, 1), make(chan struct{})
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		err := cmd.Start()
		started <- err
		if err == nil {
			_ = cmd.Wait()
		}
		close(exited)
	}()
	if err := <-started; err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("%s output:\n%s", name, out.String())
		}
	})
}
