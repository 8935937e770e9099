package main

import (
	"fmt"
	"io"

	"github.com/xvswitch/xvswitch/ctl"
	"github.com/xvswitch/xvswitch/portspec"
)

// ctlOption is --ctl of the commands that talk to a running switch; it
// sets *path to the default socket until given.
func ctlOption(path *string) option {
	*path = ctl.DefaultPath
	return option{name: "ctl", value: "PATH", help: "the control socket of the running xvswitch, as given to its run --ctl", def: ctl.DefaultPath,
		set: func(s string) error {
			if s == "" {
				return fmt.Errorf("want the path of a socket")
			}
			*path = s
			return nil
		}}
}

var addPortCommand = &command{
	name:     "add-port",
	synopsis: "--nic SPEC | --vhost SPEC [--ctl PATH]",
	summary:  "add a NIC or vhost-user port to a running switch",
	about: `Adds one port to a running switch. SPEC is what xvswitch run's --nic or
--vhost takes (xvswitch help run); the switch parses it the same way.

example:
  xvswitch add-port --vhost /run/vm3.sock,client,mac=52:54:00:00:00:03
`,
	options: func() []option { return new(addPortCmd).options() },
	run:     func(args []string, _, _ io.Writer) error { return new(addPortCmd).run(args) },
}

// addPortCmd is `xvswitch add-port`.
type addPortCmd struct {
	req   ctl.Request
	given int // --nic and --vhost options given
	ctl   string
}

func (c *addPortCmd) options() []option {
	return []option{
		c.spec("nic", "IFNAME[,queues=N][,mode=auto|copy|zerocopy][,csum=auto|fix|off][,maxmacs=N][,vlan=N][,trunk=N+M+...][,name=NAME]", "an AF_XDP port on a NIC", &c.req.NIC,
			func(s string) error { _, err := portspec.ParseNIC(s); return err }),
		c.spec("vhost", "PATH[,client][,queues=N][,mac=MAC][,spoof=allow][,maxmacs=N][,offloads=off][,own=IFNAME:Q[+Q]][,vlan=N][,trunk=N+M+...][,name=NAME][,mode=0660][,group=kvm]", "a vhost-user port", &c.req.Vhost,
			func(s string) error { _, err := portspec.ParseVhost(s); return err }),
		ctlOption(&c.ctl),
	}
}

// spec is an option naming the port: checked here with check (the
// daemon's parser), so a bad spec is a usage error, and sent as it is.
func (c *addPortCmd) spec(name, value, help string, field *string, check func(string) error) option {
	return option{name: name, value: value, help: help, set: func(s string) error {
		c.given++
		*field = s
		return check(s)
	}}
}

func (c *addPortCmd) run(args []string) error {
	pos, err := parseOptions(args, c.options())
	switch {
	case err != nil:
		return err
	case len(pos) > 0:
		return usagef("unexpected argument %q: the port is --nic SPEC or --vhost SPEC", pos[0])
	case c.given != 1:
		return usagef("add-port adds one port: give one --nic SPEC or one --vhost SPEC")
	}
	c.req.Op = ctl.OpAddPort
	_, err = ctl.Call(c.ctl, c.req)
	if err != nil && c.req.NIC != "" {
		// The daemon's word for a missing interface is the kernel's; the
		// CLI runs on the same host and can list the ones there are.
		n, _ := portspec.ParseNIC(c.req.NIC)
		if ierr := checkInterface(n.Ifname); ierr != nil {
			return fmt.Errorf("--nic %s: %w", c.req.NIC, ierr)
		}
	}
	return err
}

var delPortCommand = &command{
	name:     "del-port",
	synopsis: "NAME [--ctl PATH]",
	summary:  "remove a port from a running switch",
	about: `Removes a port from a running switch: its queues stop, its MACs leave the
forwarding table; a NIC's XDP program is detached, a vhost-user socket
file is removed. NAME is as 'xvswitch show ports' lists it.
`,
	options: func() []option { var p string; return []option{ctlOption(&p)} },
	run:     delPort,
}

func delPort(args []string, _, _ io.Writer) error {
	var sock string
	pos, err := parseOptions(args, []option{ctlOption(&sock)})
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("del-port takes one port name, as 'xvswitch show ports' lists it")
	}
	_, err = ctl.Call(sock, ctl.Request{Op: ctl.OpDelPort, Name: pos[0]})
	return err
}
