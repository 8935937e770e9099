package main

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Options are parsed here rather than by Go's flag package: its messages
// name flags with one dash and say "parse error" for a bad number, and it
// prints the whole flag list on any mistake. An option here checks its own
// value and says what it accepts, the config file sets options through the
// same table, and --help is written from it.

// option is one --NAME of a command.
type option struct {
	section string // starts a new group of options in --help
	name    string // without the dashes
	short   string // a one-letter name that also works, as tcpdump's -w does
	value   string // what the value looks like ("N", "LIST"); "" for a switch
	help    string
	def     string             // the default, for --help; "" for none
	set     func(string) error // checks and applies a value ("true"/"false" for a switch)
}

// assignment is an option given a value, and where: "--nic" on the
// command line, or "FILE:LINE: nic" in a config file.
type assignment struct {
	opt   *option
	value string
	where string
}

// usageError is a bad command line. cli prints it on one line, with a
// hint to the command's --help, and exits 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, a ...any) error {
	return &usageError{msg: fmt.Sprintf(format, a...)}
}

// errHelp is -h or --help: the command's help, on stdout, exit 0.
var errHelp = errors.New("help requested")

func findOption(opts []option, name string) *option {
	for i := range opts {
		if opts[i].name == name || opts[i].short != "" && opts[i].short == name {
			return &opts[i]
		}
	}
	return nil
}

// parseArgs splits args into option assignments and positional arguments,
// without applying them. An option is --NAME VALUE or --NAME=VALUE (one
// dash works too); a switch takes no value (--json, --json=false); "--"
// ends the options; -h and --help anywhere ask for help.
func parseArgs(args []string, opts []option) ([]assignment, []string, error) {
	var as []assignment
	var pos []string
	for i := 0; i < len(args); i++ {
		arg := args[i]
		if arg == "--" {
			pos = append(pos, args[i+1:]...)
			break
		}
		if len(arg) < 2 || arg[0] != '-' {
			pos = append(pos, arg)
			continue
		}
		name, val, hasVal := strings.Cut(strings.TrimPrefix(arg[1:], "-"), "=")
		if name == "h" || name == "help" {
			return nil, nil, errHelp
		}
		o := findOption(opts, name)
		if o == nil {
			return nil, nil, usagef("unknown option --%s%s", name, suggest(name, optionNames(opts), "--"))
		}
		name = o.name
		switch {
		case o.value == "":
			if !hasVal {
				val = "true"
			} else if b, err := strconv.ParseBool(val); err != nil {
				return nil, nil, usagef("--%s=%s: want --%s, --%s=true or --%s=false", name, val, name, name, name)
			} else {
				val = strconv.FormatBool(b)
			}
		case !hasVal:
			if i+1 == len(args) {
				return nil, nil, usagef("--%s needs a value: %s", name, o.value)
			}
			i++
			val = args[i]
		}
		as = append(as, assignment{opt: o, value: val, where: "--" + name})
	}
	return as, pos, nil
}

// apply sets each assignment in order, so a later one overrides (or, for
// an option that repeats, adds to) an earlier one.
func apply(as []assignment) error {
	for _, a := range as {
		if err := a.opt.set(a.value); err != nil {
			return usagef("%s %s: %v", a.where, a.value, err)
		}
	}
	return nil
}

// parseOptions parses and applies args, and returns the positional ones.
func parseOptions(args []string, opts []option) ([]string, error) {
	as, pos, err := parseArgs(args, opts)
	if err != nil {
		return nil, err
	}
	return pos, apply(as)
}

// positionals parses the command line of a command without options that
// takes at most max arguments; takes says what it takes.
func positionals(args []string, max int, takes string) ([]string, error) {
	pos, err := parseOptions(args, nil)
	if err == nil && len(pos) > max {
		err = usagef("unexpected argument %q: %s", pos[max], takes)
	}
	return pos, err
}

func optionNames(opts []option) []string {
	names := make([]string, len(opts))
	for i, o := range opts {
		names[i] = o.name
	}
	return names
}

// writeOptions lists options as --help shows them: the option and its
// value on one line, what it does indented below.
func writeOptions(w io.Writer, opts []option) {
	for _, o := range opts {
		if o.section != "" {
			fmt.Fprintf(w, "\n%s:\n", o.section)
		}
		head := "  --" + o.name
		if o.value != "" {
			head += " " + o.value
		}
		if o.short != "" {
			head += ", -" + strings.TrimSpace(o.short+" "+o.value)
		}
		fmt.Fprintln(w, head)
		help := o.help
		if o.def != "" {
			help += " (default " + o.def + ")"
		}
		for _, line := range wrap(help, 72) {
			fmt.Fprintln(w, "        "+line)
		}
	}
}

// wrap breaks s into lines of at most width bytes, at spaces.
func wrap(s string, width int) []string {
	var lines []string
	line := ""
	for _, word := range strings.Fields(s) {
		if line != "" && len(line)+1+len(word) > width {
			lines = append(lines, line)
			line = ""
		}
		if line != "" {
			line += " "
		}
		line += word
	}
	return append(lines, line)
}

// suggest returns ` (did you mean PREFIX+X?)` for the candidate closest to
// s, if it is close enough to be a typo, else "".
func suggest(s string, candidates []string, prefix string) string {
	best, bestD := "", 3
	for _, c := range candidates {
		if d := editDistance(s, c); d < bestD {
			best, bestD = c, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %s%s?)", prefix, best)
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
