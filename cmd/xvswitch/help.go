package main

import (
	"fmt"
	"io"
	"strings"
)

const overview = `xvswitch: a userspace virtual switch: NICs over AF_XDP, VMs over vhost-user.

usage: xvswitch COMMAND [OPTIONS]

commands:
`

const overviewEnd = `
Options follow the command: --name VALUE or --name=VALUE.
'xvswitch help COMMAND' or 'xvswitch COMMAND --help' says more.
`

func writeOverview(w io.Writer) {
	fmt.Fprint(w, overview)
	for _, c := range commands {
		fmt.Fprintf(w, "  %-10s %s\n", c.name, c.summary)
	}
	fmt.Fprint(w, overviewEnd)
}

// writeHelp is `xvswitch help NAME`: the usage line, what the command
// does, and its options.
func writeHelp(w io.Writer, c *command) {
	fmt.Fprintf(w, "usage: %s\n\n%s", strings.TrimSpace("xvswitch "+c.name+" "+c.synopsis), c.about)
	if c.options == nil {
		return
	}
	opts := c.options()
	if opts[0].section == "" {
		fmt.Fprint(w, "\noptions:\n")
	}
	writeOptions(w, opts)
}

var helpCommand = &command{
	name:     "help",
	synopsis: "[COMMAND]",
	summary:  "say what a command does and what options it takes",
	about:    "Lists the commands, or says what one does and what options it takes.\n",
	run:      help,
}

func help(args []string, out, _ io.Writer) error {
	pos, err := positionals(args, 1, "help takes one command")
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		writeOverview(out)
		return nil
	}
	c := findCommand(pos[0])
	if c == nil {
		return usagef("unknown command %q: want %s%s", pos[0], orList(commandNames()), suggest(pos[0], commandNames(), ""))
	}
	writeHelp(out, c)
	return nil
}
