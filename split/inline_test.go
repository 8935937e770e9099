package split

import (
	"os/exec"
	"regexp"
	"testing"
)

// TestHotHelpersInline: the helpers the data path calls per frame or per
// descriptor must stay small enough for Go's inliner (a call costs more
// than most of them). The compiler's own report (-gcflags=-m) is the proof.
func TestHotHelpersInline(t *testing.T) {
	checkInlined(t, []string{"needEvent", "availEventOff", "usedEventOff"})
}

// checkInlined builds this package with -gcflags=-m and fails for every
// function of names the compiler does not report as inlinable.
func checkInlined(t *testing.T, names []string) {
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
	for _, m := range regexp.MustCompile(`(?m): can inline (\S+)`).FindAllSubmatch(out, -1) {
		can[string(m[1])] = true
	}
	for _, n := range names {
		if !can[n] {
			t.Errorf("%s is not inlinable any more (go build -gcflags=-m=2 says why)", n)
		}
	}
}
