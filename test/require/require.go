// Package require is the skip policy of the integration tests: a test that
// needs root, a program on PATH or a long run calls Root, Commands or Long
// first, and skips with the reason when it cannot run here, or fails when
// XVS_REQUIRE_PRIV=1 (StrictEnv) says every such test must run. No
// production package imports it.
package require

import (
	"os"
	"os/exec"
	"testing"
)

// StrictEnv is the variable that turns every "cannot run here" skip
// into a failure. .ci/run sets it, so CI can never pass by skipping.
const StrictEnv = "XVS_REQUIRE_PRIV"

// Strict reports whether missing privileges or tools must fail tests.
func Strict() bool { return os.Getenv(StrictEnv) == "1" }

// SkipOrFail skips t with reason, or fails it when XVS_REQUIRE_PRIV=1.
func SkipOrFail(t testing.TB, reason string) {
	t.Helper()
	if Strict() {
		t.Fatalf("%s (%s=1: this test must run)", reason, StrictEnv)
	}
	t.Skip(reason)
}

// Root skips (or fails, see SkipOrFail) unless the test runs as root.
func Root(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		SkipOrFail(t, "needs root (network namespaces, XDP, AF_XDP, bpffs); run as root or via `make test`")
	}
}

// Commands skips (or fails) unless every named program is on PATH.
func Commands(t testing.TB, names ...string) {
	t.Helper()
	for _, n := range names {
		if _, err := exec.LookPath(n); err != nil {
			SkipOrFail(t, "needs "+n+" on PATH; `make test` installs it (scripts/install-deps)")
		}
	}
}

// Long skips long-running integration tests under -short, even in
// strict mode: -short is an explicit choice of the person running them.
func Long(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test skipped under -short")
	}
}
