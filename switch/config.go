package vswitch

import (
	"fmt"
	"time"
)

// Config is everything `xvswitch run` is told, by flags or a config file.
type Config struct {
	NICs      []NICSpec
	Vhosts    []VhostSpec
	Gens      []GenSpec // benchmark-only frame generators (genport.go)
	XConnects []XConnect
	Workers   int   // poll workers (default 1)
	CPUs      []int // CPUs to pin workers to, round robin; empty: not pinned
	Ctl       string
	Metrics   string        // address of the Prometheus endpoint (":9417"); empty: none
	FDBAge    time.Duration // learned MACs expire after this (default 300 s)
	// IdleAfter is how long a worker's queues must be empty before it stops
	// polling and sleeps in epoll (0: DefaultIdleAfter; negative: never).
	IdleAfter time.Duration
}

// Validate fills defaults and checks names are unique and cross-connects
// name existing ports, each port at most once.
func (c *Config) Validate() error {
	if c.Workers == 0 {
		c.Workers = 1
	}
	if c.Workers < 0 || c.Workers > 64 {
		return fmt.Errorf("%w: workers=%d", ErrBadSpec, c.Workers)
	}
	if c.Ctl == "" {
		c.Ctl = DefaultCtlPath
	}
	if c.FDBAge == 0 {
		c.FDBAge = 300 * time.Second
	}
	names := map[string]bool{}
	for _, n := range c.NICs {
		if names[n.Name] {
			return fmt.Errorf("%w: two ports named %q", ErrBadSpec, n.Name)
		}
		names[n.Name] = true
	}
	for _, v := range c.Vhosts {
		if names[v.Name] {
			return fmt.Errorf("%w: two ports named %q", ErrBadSpec, v.Name)
		}
		names[v.Name] = true
	}
	for _, g := range c.Gens {
		if names[g.Name] {
			return fmt.Errorf("%w: two ports named %q", ErrBadSpec, g.Name)
		}
		names[g.Name] = true
	}
	inX := map[string]bool{}
	for _, x := range c.XConnects {
		for _, n := range []string{x.A, x.B} {
			if !names[n] {
				return fmt.Errorf("%w: --xconnect %s=%s: no port named %q", ErrBadSpec, x.A, x.B, n)
			}
			if inX[n] {
				return fmt.Errorf("%w: port %q is in two cross-connects", ErrBadSpec, n)
			}
			inX[n] = true
		}
	}
	return nil
}
