// Package inlining checks, from a package's own tests, that the helpers its
// data path calls per frame or per descriptor stay inlinable: a call costs
// more than most of them, and an edit that tips one over Go's inlining
// budget changes nothing else a test would see. The compiler's own report
// (go build -gcflags=-m) is the proof.
package inlining

import (
	"os/exec"
	"regexp"
	"testing"
)

var canInline = regexp.MustCompile(`(?m): can inline (\S+)`)

// Check builds the package in the current directory (a test's directory is
// its package's) with -gcflags=-m and fails t for every name the compiler
// does not report as inlinable. Names are as the compiler prints them:
// "Func", "(*Type).Method", "Type.Method".
func Check(t testing.TB, names ...string) {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is not on PATH: %v", err)
	}
	out, err := exec.Command(goTool, "build", "-gcflags=-m", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build -gcflags=-m: %v\n%s", err, out)
	}
	can := map[string]bool{}
	for _, m := range canInline.FindAllSubmatch(out, -1) {
		can[string(m[1])] = true
	}
	for _, n := range names {
		if !can[n] {
			t.Errorf("%s is not inlinable any more (go build -gcflags=-m=2 says why)", n)
		}
	}
}
