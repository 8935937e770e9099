package qemu

import (
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"testing"
)

// GuestTool builds the Go command pkg (an import path of this module, such
// as .../test/qemu/guest/udpseq) as a static linux/amd64 binary for the
// guest, whose initramfs has no libc, and returns its path: put it in
// GuestConfig.Files. The binary lives in the test's temporary directory;
// Go's build cache makes the next build cheap.
func GuestTool(t testing.TB, pkg string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), path.Base(pkg))
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", out, pkg)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building %s for the guest: %v\n%s", pkg, err, b)
	}
	return out
}
