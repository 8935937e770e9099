package vswitch

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/xvswitch/xvswitch/ctl"
	"github.com/xvswitch/xvswitch/portspec"
)

// ErrBadConfig means the switch's configuration is inconsistent (duplicate
// names, a cross-connect naming a missing port, a worker count out of range).
var ErrBadConfig = errors.New("vswitch: bad configuration")

// Config is what the switch is built from: its ports, cross-connects and
// workers. `xvswitch run` fills it from flags or a config file.
type Config struct {
	NICs   []portspec.NIC
	Vhosts []portspec.Vhost
	// Others are ports of kinds the switch does not build itself (the
	// benchmark generator, package framegen), added after the NICs and
	// vhost ports.
	Others    []NamedPort
	XConnects []portspec.XConnect
	Workers   int           // poll workers (default 1)
	CPUs      []int         // CPUs to pin workers to, round robin; empty: not pinned
	Ctl       string        // the control socket (default ctl.DefaultPath)
	FDBAge    time.Duration // learned MACs expire after this (default 300 s)
	// CtlMode and CtlGID are the control socket's permissions (0: 0660)
	// and group (0: the daemon's).
	CtlMode os.FileMode
	CtlGID  int
	// Ready, when set, is called once Run added the configured ports and
	// the control socket listens (the daemon's sd_notify READY=1).
	Ready func()
	// IdleAfter is how long a worker's queues must be empty before it stops
	// polling and sleeps in epoll (0: DefaultIdleAfter; negative: never).
	IdleAfter time.Duration
	// RxBackoff is how long a guest's receive queue leaves its ring alone
	// after a burst found it without buffers, counting frames for it as
	// no_rx_buffers meanwhile (virtionet.QueueConfig.RxBackoff; 0:
	// DefaultRxBackoff; negative: never).
	RxBackoff time.Duration
}

// NamedPort is a port driver and the name it goes by.
type NamedPort struct {
	Name   string
	Driver PortDriver
}

// MaxWorkers bounds Config.Workers.
const MaxWorkers = 64

// Validate fills defaults and checks names are unique and cross-connects
// name existing ports, each port at most once.
func (c *Config) Validate() error {
	if c.Workers == 0 {
		c.Workers = 1
	}
	if c.Workers < 0 || c.Workers > MaxWorkers {
		return fmt.Errorf("%w: workers=%d: want 1..%d", ErrBadConfig, c.Workers, MaxWorkers)
	}
	if c.Ctl == "" {
		c.Ctl = ctl.DefaultPath
	}
	if c.FDBAge == 0 {
		c.FDBAge = 300 * time.Second
	}
	names := map[string]bool{}
	var all []string
	for _, n := range c.NICs {
		all = append(all, n.Name)
	}
	for _, v := range c.Vhosts {
		all = append(all, v.Name)
	}
	for _, o := range c.Others {
		all = append(all, o.Name)
	}
	for _, n := range all {
		if names[n] {
			return fmt.Errorf("%w: two ports named %q", ErrBadConfig, n)
		}
		names[n] = true
	}
	inX := map[string]bool{}
	for _, x := range c.XConnects {
		for _, n := range []string{x.A, x.B} {
			if !names[n] {
				return fmt.Errorf("%w: --xconnect %s=%s: no port named %q", ErrBadConfig, x.A, x.B, n)
			}
			if inX[n] {
				return fmt.Errorf("%w: port %q is in two cross-connects", ErrBadConfig, n)
			}
			inX[n] = true
		}
	}
	return nil
}
