// Command xvswitch is the xvswitch daemon (`xvswitch run`) and its CLI
// (`xvswitch show ...`, `add-port`, `del-port`), which talks to the daemon
// over its control socket.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

func main() {
	os.Exit(cli(os.Args[1:], os.Stdout, os.Stderr))
}

// Exit codes: 0 done (help and version included), 1 the command failed,
// 2 the command line is wrong.
const (
	exitOK    = 0
	exitFail  = 1
	exitUsage = 2
)

// command is one `xvswitch NAME`.
type command struct {
	name     string
	synopsis string // what follows `xvswitch NAME` in its usage line
	summary  string // one line, for `xvswitch --help`
	about    string // what `xvswitch help NAME` says above the options
	// options returns the command's options, unbound, for its help (nil:
	// it has none).
	options func() []option
	run     func(args []string, out, errOut io.Writer) error
}

// commands are listed by `xvswitch --help` in this order.
var commands []*command

func init() {
	commands = []*command{runCommand, showCommand, clearCommand, captureCommand, addPortCommand, delPortCommand, versionCommand, helpCommand}
}

func findCommand(name string) *command {
	for _, c := range commands {
		if c.name == name {
			return c
		}
	}
	return nil
}

func commandNames() []string {
	var names []string
	for _, c := range commands {
		names = append(names, c.name)
	}
	return names
}

// errReported is a failure the command has already told the user about
// (the daemon logs its fatal error before "xvswitch stopped").
var errReported = errors.New("reported")

// cli runs one xvswitch command line and returns the exit code.
func cli(args []string, out, errOut io.Writer) int {
	if len(args) == 0 {
		writeOverview(errOut)
		return exitUsage
	}
	switch args[0] {
	case "-h", "--help", "-help":
		writeOverview(out)
		return exitOK
	case "--version", "-version":
		args = []string{"version"}
	}
	c := findCommand(args[0])
	if c == nil {
		msg := fmt.Sprintf("unknown command %q: want %s%s", args[0], orList(commandNames()), suggest(args[0], commandNames(), ""))
		if strings.HasPrefix(args[0], "-") {
			msg = fmt.Sprintf("%s before the command: options follow it, as in xvswitch show ports --ctl PATH", args[0])
		}
		fmt.Fprintf(errOut, "xvswitch: %s\nSee 'xvswitch --help'.\n", msg)
		return exitUsage
	}
	err := c.run(args[1:], out, errOut)
	var ue *usageError
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, errHelp):
		writeHelp(out, c)
		return exitOK
	case errors.As(err, &ue):
		fmt.Fprintf(errOut, "xvswitch %s: %s\nSee 'xvswitch %s --help'.\n", c.name, ue.msg, c.name)
		return exitUsage
	case errors.Is(err, errReported):
		return exitFail
	}
	fmt.Fprintf(errOut, "xvswitch %s: %v\n", c.name, err)
	return exitFail
}

// orList writes "a, b or c".
func orList(words []string) string {
	if len(words) < 2 {
		return strings.Join(words, "")
	}
	return strings.Join(words[:len(words)-1], ", ") + " or " + words[len(words)-1]
}
