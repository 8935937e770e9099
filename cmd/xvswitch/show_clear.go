package main

import (
	"io"

	"github.com/xvswitch/xvswitch/ctl"
)

var clearCommand = &command{
	name:     "clear",
	synopsis: "stats [--ctl PATH]",
	summary:  "zero a running switch's counters",
	about: `Zeroes what 'xvswitch show stats' counts of a running switch:
  stats   every port's and queue's packets, bytes, flood copies and drops,
          and each port's learn_refused. The kernel's counters of a NIC (XDP
          verdicts, AF_XDP statistics, interface events) are the kernel's:
          they cannot be reset and stay since start, as do the workers'
          sleeps and busy shares (show workers). Metrics see the cleared
          counters start again from zero, as after a restart.
`,
	options: func() []option { return new(clearCmd).options() },
	run:     func(args []string, _, _ io.Writer) error { return new(clearCmd).run(args) },
}

// clearCmd is `xvswitch clear`.
type clearCmd struct{ ctl string }

func (c *clearCmd) options() []option { return []option{ctlOption(&c.ctl)} }

func (c *clearCmd) run(args []string) error {
	pos, err := parseOptions(args, c.options())
	switch {
	case err != nil:
		return err
	case len(pos) != 1:
		return usagef("clear what? want stats")
	case pos[0] != "stats":
		return usagef("cannot clear %q: want stats%s", pos[0], suggest(pos[0], []string{"stats"}, ""))
	}
	_, err = ctl.Call(c.ctl, ctl.Request{Op: ctl.OpClearStats})
	return err
}
