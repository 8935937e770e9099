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
	var when string
	modified := false
	goVersion := runtime.Version()
	if bi != nil {
		if release == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			release = bi.Main.Version
		}
		goVersion = bi.GoVersion
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				if rev == "" {
					rev = s.Value
				}
			case "vcs.time":
				when = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
	}
	if release == "" {
		release = "devel"
	}
	commit := "commit unknown (built without version control information)"
	if rev != "" {
		commit = "commit " + rev
		if modified {
			commit += " (modified)"
		}
		if when != "" {
			commit += ", " + when
		}
	}
	return fmt.Sprintf("xvswitch %s\n%s\n%s %s/%s\n", release, commit, goVersion, runtime.GOOS, runtime.GOARCH)
}
