package main

import (
	"fmt"
	"io"
	"os"
	"sync"
	"testing"
)

// runT lets the bench reuse the integration harness of test/ (testpmd,
// namespaces, veth pairs), whose helpers take a testing.TB, from a plain
// program. testing.TB cannot be implemented outside package testing (it
// has an unexported method), so runT embeds a nil testing.TB for that
// method and defines every method the harness calls. Invariant: a method
// the harness would call but runT does not define would hit the nil
// interface and panic; step turns that panic into an error like any other,
// so a harness change shows up as a failed run, never a crash.
//
// Fatalf and Skip unwind the goroutine that runs the step (by panicking
// with an abort that step recovers), as testing's FailNow does. The
// harness calls them only from the goroutine that called it.
type runT struct {
	testing.TB // nil; see above

	name string
	dir  string    // TempDir creates directories here
	log  io.Writer // Logf

	mu       sync.Mutex
	failed   bool
	cleanups []func()
}

// abort is what Fatalf and Skip panic with.
type abort struct {
	msg  string
	skip bool
}

func newRunT(name, dir string, log io.Writer) *runT {
	return &runT{name: name, dir: dir, log: log}
}

func (t *runT) Name() string { return t.name }
func (t *runT) Helper()      {}

func (t *runT) Logf(format string, args ...any) {
	fmt.Fprintf(t.log, "    %s: %s\n", t.name, fmt.Sprintf(format, args...))
}
func (t *runT) Log(args ...any) { t.Logf("%s", fmt.Sprint(args...)) }

func (t *runT) Errorf(format string, args ...any) {
	t.mu.Lock()
	t.failed = true
	t.mu.Unlock()
	t.Logf(format, args...)
}
func (t *runT) Error(args ...any) { t.Errorf("%s", fmt.Sprint(args...)) }
func (t *runT) Fail()             { t.mu.Lock(); t.failed = true; t.mu.Unlock() }

func (t *runT) Failed() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.failed
}

func (t *runT) Fatalf(format string, args ...any) {
	t.Fail()
	panic(abort{msg: fmt.Sprintf(format, args...)})
}
func (t *runT) Fatal(args ...any) { t.Fatalf("%s", fmt.Sprint(args...)) }
func (t *runT) FailNow()          { t.Fatalf("FailNow") }

func (t *runT) Skip(args ...any) { panic(abort{msg: fmt.Sprint(args...), skip: true}) }
func (t *runT) Skipf(format string, args ...any) {
	panic(abort{msg: fmt.Sprintf(format, args...), skip: true})
}
func (t *runT) SkipNow() { panic(abort{msg: "skipped", skip: true}) }

// TempDir returns a new directory under the run's directory; the whole
// run directory is removed (or kept) by the caller.
func (t *runT) TempDir() string {
	d, err := os.MkdirTemp(t.dir, "t")
	if err != nil {
		t.Fatalf("TempDir: %v", err)
	}
	return d
}

// Cleanup registers fn; finish runs them last-in first-out.
func (t *runT) Cleanup(fn func()) {
	t.mu.Lock()
	t.cleanups = append(t.cleanups, fn)
	t.mu.Unlock()
}

// finish runs the cleanups (stopping processes, deleting namespaces),
// even if one of them panics.
func (t *runT) finish() {
	for {
		t.mu.Lock()
		n := len(t.cleanups)
		if n == 0 {
			t.mu.Unlock()
			return
		}
		fn := t.cleanups[n-1]
		t.cleanups = t.cleanups[:n-1]
		t.mu.Unlock()
		if err := t.step(fn); err != nil {
			t.Logf("cleanup: %v", err)
		}
	}
}

// errSkipped is returned by step when the harness skipped (no root, no
// dpdk-testpmd).
var errSkipped = fmt.Errorf("skipped")

// step runs fn, turning an abort (Fatalf, Skip) or any other panic into an
// error.
func (t *runT) step(fn func()) (err error) {
	defer func() {
		switch p := recover().(type) {
		case nil:
		case abort:
			if p.skip {
				err = fmt.Errorf("%w: %s", errSkipped, p.msg)
			} else {
				err = fmt.Errorf("%s", p.msg)
			}
		default:
			err = fmt.Errorf("panic: %v", p)
		}
	}()
	fn()
	return nil
}

// name2file is the run's name as a file name.
func (t *runT) name2file() string {
	b := []byte(t.name)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '.') {
			b[i] = '_'
		}
	}
	return string(b)
}
