package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strings"
)

// readConfigFile applies a config file (`--config FILE`): each line is an
// option of `xvswitch run` without its dashes and its value, separated by
// any spaces or tabs ("workers 2", "nic eth1,queues=2"). A # at the start
// of a line or after a space or tab starts a comment, so "workers 2 # two
// cores" is a setting and a comment, while a # inside a value stays.
func (r *runFlags) readConfigFile(path string, opts []option) error {
	f, err := os.Open(path)
	if err != nil {
		return usagef("--config: %v", err)
	}
	defer f.Close()
	as, err := configAssignments(f, path, opts)
	if err != nil {
		return err
	}
	return apply(as)
}

// configAssignments reads a config file into assignments, each named
// after its file and line for error messages.
func configAssignments(in io.Reader, name string, opts []option) ([]assignment, error) {
	var as []assignment
	sc := bufio.NewScanner(in)
	for line := 1; sc.Scan(); line++ {
		s := strings.TrimSpace(stripComment(sc.Text()))
		if s == "" {
			continue
		}
		key := strings.Fields(s)[0]
		val := strings.TrimSpace(s[len(key):])
		key = strings.TrimPrefix(key, "--")
		where := fmt.Sprintf("%s:%d: %s", name, line, key)
		o := findOption(opts, key)
		switch {
		case o == nil:
			return nil, usagef("%s:%d: unknown setting %q%s", name, line, key, suggest(key, optionNames(opts), ""))
		case o.name == "config":
			return nil, usagef("%s: a config file cannot include another", where)
		case o.value == "" && val == "":
			val = "true"
		case val == "":
			return nil, usagef("%s needs a value: %s", where, o.value)
		}
		as = append(as, assignment{opt: o, value: val, where: where})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return as, nil
}

// stripComment cuts s at a # that starts it or follows a space or tab.
func stripComment(s string) string {
	for i := 0; i < len(s); i++ {
		if s[i] == '#' && (i == 0 || s[i-1] == ' ' || s[i-1] == '\t') {
			return s[:i]
		}
	}
	return s
}
