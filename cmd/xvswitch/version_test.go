package main

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"testing"
)

func TestVersionText(t *testing.T) {
	platform := runtime.GOOS + "/" + runtime.GOARCH
	stamped := &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "v0.0.0-20261202060000-b3e076c82a0f+dirty"},
		Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "b3e076c82a0f06e804aef2a73d04d5628c7aa639"},
			{Key: "vcs.time", Value: "2026-12-02T06:00:00Z"},
			{Key: "vcs.modified", Value: "true"},
		}}
	for _, tc := range []struct {
		release, commit string
		bi              *debug.BuildInfo
		want            string
	}{
		{"", "", stamped, "xvswitch v0.0.0-20261202060000-b3e076c82a0f+dirty\ncommit b3e076c82a0f06e804aef2a73d04d5628c7aa639 (modified), 2026-12-02T06:00:00Z\ngo1.26.0 " + platform + "\n"},
		{"v1.2.0", "", stamped, "xvswitch v1.2.0\ncommit b3e076c82a0f06e804aef2a73d04d5628c7aa639 (modified), 2026-12-02T06:00:00Z\ngo1.26.0 " + platform + "\n"},
		{"", "", &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "(devel)"}},
			"xvswitch devel\ncommit unknown (built without version control information)\ngo1.26.0 " + platform + "\n"},
		{"b3e076c-dirty", "b3e076c82a0f06e804aef2a73d04d5628c7aa639", &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "(devel)"}},
			"xvswitch b3e076c-dirty\ncommit b3e076c82a0f06e804aef2a73d04d5628c7aa639\ngo1.26.0 " + platform + "\n"},
	} {
		if got := versionText(tc.release, tc.commit, tc.bi); got != tc.want {
			t.Errorf("versionText(%q, %q): got\n%s\nwant\n%s", tc.release, tc.commit, got, tc.want)
		}
	}
	if got := versionText("", "", nil); got != "xvswitch devel\ncommit unknown (built without version control information)\n"+runtime.Version()+" "+platform+"\n" {
		t.Errorf("no build info: %q", got)
	}
}

// TestVersion: `xvswitch version` and `--version` print the same, exit 0;
// a binary linked as `make build` links it names the version and commit
// it was given.
func TestVersion(t *testing.T) {
	code, out, errOut := runCLI("version")
	code2, out2, _ := runCLI("--version")
	if code != 0 || code2 != 0 || errOut != "" || out != out2 || out == "" {
		t.Fatalf("version: exit %d %d, stdout %q and %q, stderr %q", code, code2, out, out2, errOut)
	}
	bin := filepath.Join(t.TempDir(), "xvswitch")
	ldflags := "-X main.version=v9.9.9-test -X main.commit=0123456789abcdef0123456789abcdef01234567"
	if b, err := exec.Command("go", "build", "-ldflags", ldflags, "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, b)
	}
	got, err := exec.Command(bin, "--version").Output()
	want := "xvswitch v9.9.9-test\ncommit 0123456789abcdef0123456789abcdef01234567\n"
	if err != nil || len(got) < len(want) || string(got[:len(want)]) != want {
		t.Fatalf("--version: %v\n%s\nwant it to start with\n%s", err, got, want)
	}
}
