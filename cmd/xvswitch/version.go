package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

// version and commit name the release and the commit it was built from,
// set at link time as `make build` does:
//
//	go build -ldflags "-X main.version=$(git describe --always --dirty) -X main.commit=$(git rev-parse HEAD)"
//
// Unset, they come from what the Go toolchain records in the binary: the
// main module's version ("devel" for a plain checkout) and, when it
// stamped the build with version control information, vcs.revision and
// vcs.modified.
var version, commit string

var versionCommand = &command{
	name:    "version",
	summary: "print this build's version and commit (also: xvswitch --version)",
	about:   "Prints the version, the commit it was built from (modified: with uncommitted\nchanges) and the Go toolchain.\n",
	run:     printVersion,
}

func printVersion(args []string, out, _ io.Writer) error {
	if _, err := positionals(args, 0, "version takes none"); err != nil {
		return err
	}
	bi, _ := debug.ReadBuildInfo()
	fmt.Fprint(out, versionText(version, commit, bi))
	return nil
}

// versionText is what `xvswitch version` prints, from the -X values (if
// any) and the build info the Go toolchain records (bi may be nil).
func versionText(release, rev string, bi *debug.BuildInfo) string {
	s := readStamp(release, rev, bi)
	commit := "commit unknown (built without version control information)"
	if s.rev != "" {
		commit = "commit " + s.rev
		if s.modified {
			commit += " (modified)"
		}
		if s.when != "" {
			commit += ", " + s.when
		}
	}
	return fmt.Sprintf("xvswitch %s\n%s\n%s %s/%s\n", s.release, commit, s.goVersion, runtime.GOOS, runtime.GOARCH)
}

// stamp is what a build says of itself: `xvswitch version` and the
// metrics' xvswitch_build_info.
type stamp struct {
	release, rev, when, goVersion string
	modified                      bool
}

// readStamp takes the -X values, and what they leave unset from bi.
func readStamp(release, rev string, bi *debug.BuildInfo) stamp {
	s := stamp{release: release, rev: rev, goVersion: runtime.Version()}
	if bi != nil {
		if s.release == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			s.release = bi.Main.Version
		}
		s.goVersion = bi.GoVersion
		for _, set := range bi.Settings {
			switch set.Key {
			case "vcs.revision":
				if s.rev == "" {
					s.rev = set.Value
				}
			case "vcs.time":
				s.when = set.Value
			case "vcs.modified":
				s.modified = set.Value == "true"
			}
		}
	}
	if s.release == "" {
		s.release = "devel"
	}
	return s
}
