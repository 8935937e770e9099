package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// session is the demo's testing.TB. test/netns and test/qemu build the
// topology for tests and take a testing.TB to register cleanups and report
// failures; the demo reuses them as they are, so its namespace, veth pair
// and guest are made exactly as the tests make theirs. A session keeps
// the cleanups itself and runs them, last registered first, on every way
// out of the demo; a fatal error unwinds the demo's goroutine with a panic
// that session.run recovers.
type session struct {
	// The embedded interface is nil: it only supplies testing.TB's
	// unexported method. Every exported method is defined below, so none
	// reaches it.
	testing.TB

	out    io.Writer
	dir    string // the run's directory, removed last
	ctx    context.Context
	cancel context.CancelFunc

	mu       sync.Mutex
	cleanups []func()
	closed   bool // cleanups ran: later registrations run at once
	failed   bool
}

// fatal is what Fatalf panics with, so run can tell it from a bug.
type fatal struct{ msg string }

func newSession(out io.Writer) (*session, error) {
	dir, err := os.MkdirTemp("", "xvswitch-demo-")
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &session{out: out, dir: dir, ctx: ctx, cancel: cancel}, nil
}

// run calls fn and turns a Fatalf inside it into an error.
func (s *session) run(fn func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			f, ok := r.(fatal)
			if !ok {
				panic(r)
			}
			err = fmt.Errorf("%s", f.msg)
		}
	}()
	return fn()
}

// teardown runs every cleanup, last registered first, then removes the
// run's directory. It is idempotent; a cleanup registered later (by a
// demo goroutine still unwinding) runs at once.
func (s *session) teardown() {
	s.cancel()
	for {
		s.mu.Lock()
		s.closed = true
		n := len(s.cleanups)
		if n == 0 {
			s.mu.Unlock()
			break
		}
		f := s.cleanups[n-1]
		s.cleanups = s.cleanups[:n-1]
		s.mu.Unlock()
		f()
	}
	_ = os.RemoveAll(s.dir)
}

func (s *session) Cleanup(f func()) {
	s.mu.Lock()
	closed := s.closed
	if !closed {
		s.cleanups = append(s.cleanups, f)
	}
	s.mu.Unlock()
	if closed {
		f()
	}
}

func (s *session) Logf(format string, args ...any) {
	fmt.Fprintf(s.out, "    "+format+"\n", args...)
}
func (s *session) Log(args ...any) { s.Logf("%s", fmt.Sprint(args...)) }

func (s *session) Errorf(format string, args ...any) {
	s.Fail()
	fmt.Fprintf(s.out, "FAILED: "+format+"\n", args...)
}
func (s *session) Error(args ...any) { s.Errorf("%s", fmt.Sprint(args...)) }

func (s *session) Fatalf(format string, args ...any) {
	s.Fail()
	panic(fatal{fmt.Sprintf(format, args...)})
}
func (s *session) Fatal(args ...any) { s.Fatalf("%s", fmt.Sprint(args...)) }
func (s *session) FailNow()          { s.Fatalf("failed") }

// Skip is a test's "cannot run here" (not root, a program missing): for
// the demo that is the end, with the reason.
func (s *session) Skipf(format string, args ...any) { s.Fatalf(format, args...) }
func (s *session) Skip(args ...any)                 { s.Fatalf("%s", fmt.Sprint(args...)) }
func (s *session) SkipNow()                         { s.Fatalf("cannot run here") }
func (s *session) Skipped() bool                    { return false }

func (s *session) Fail() {
	s.mu.Lock()
	s.failed = true
	s.mu.Unlock()
}

func (s *session) Failed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failed
}

func (s *session) Helper()                  {}
func (s *session) Name() string             { return "xvswitch-demo" }
func (s *session) Context() context.Context { return s.ctx }
func (s *session) Output() io.Writer        { return s.out }
func (s *session) Attr(key, value string)   {}
func (s *session) ArtifactDir() string      { return s.dir }
func (s *session) Setenv(key, value string) { _ = os.Setenv(key, value) }
func (s *session) Chdir(dir string)         { _ = os.Chdir(dir) }
func (s *session) TempDir() string {
	d, err := os.MkdirTemp(s.dir, "tmp")
	if err != nil {
		s.Fatalf("temporary directory: %v", err)
	}
	return d
}

// path is a file in the run's directory.
func (s *session) path(name string) string { return filepath.Join(s.dir, name) }

// step narrates what the demo does next.
func (s *session) step(format string, args ...any) {
	fmt.Fprintf(s.out, "==> "+format+"\n", args...)
}

// cmdline prints a command the demo runs, as it could be typed.
func (s *session) cmdline(name string, args ...string) {
	fmt.Fprintf(s.out, "$ %s\n", shellLine(name, args...))
}

// indent prints a command's output, indented under it.
func (s *session) indent(text string) {
	for _, l := range strings.Split(strings.TrimRight(text, "\n"), "\n") {
		if l == "" {
			fmt.Fprintln(s.out)
			continue
		}
		fmt.Fprintf(s.out, "    %s\n", l)
	}
}
