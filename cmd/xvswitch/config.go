package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/xvswitch/xvswitch/ctl"
	"github.com/xvswitch/xvswitch/framegen"
	"github.com/xvswitch/xvswitch/portspec"
	"github.com/xvswitch/xvswitch/vswitch"
)

// settings is everything `xvswitch run` is told, by flags or a config
// file: the switch's configuration and what the daemon around it runs.
type settings struct {
	vswitch.Config
	Gens    []portspec.Gen // benchmark-only generator ports (framegen)
	Metrics string         // address of the Prometheus endpoint (":9417"); empty: none
}

// runFlags collects `xvswitch run` flags. Flags that name ports repeat.
type runFlags struct {
	cfg    settings
	config string
}

type repeated func(string) error

func (r repeated) String() string     { return "" }
func (r repeated) Set(s string) error { return r(s) }

func (r *runFlags) register(fs *flag.FlagSet) {
	fs.Var(repeated(r.addNIC), "nic", "an AF_XDP port: IFNAME[,queues=N][,mode=auto|copy|zerocopy][,maxmacs=N][,name=NAME] (repeats)")
	fs.Var(repeated(r.addVhost), "vhost", "a vhost-user port: PATH[,client][,queues=N][,mac=MAC][,spoof=allow][,maxmacs=N][,name=NAME][,mode=0660][,group=kvm] (repeats)")
	fs.Var(repeated(r.addGen), "gen", "benchmarks only: a frame generator port sending as fast as it is polled: NAME,size=N,dst=MAC[,src=MAC] (repeats)")
	fs.Var(repeated(r.addXConnect), "xconnect", "cross-connect two ports: NAME=NAME (repeats)")
	fs.StringVar(&r.cfg.Ctl, "ctl", ctl.DefaultPath, "control socket path")
	fs.IntVar(&r.cfg.Workers, "workers", 1, "poll workers")
	fs.StringVar(&r.cfg.Metrics, "metrics", "", "serve Prometheus metrics at http://ADDR/metrics (e.g. 127.0.0.1:9417)")
	fs.Var(repeated(r.setCPUs), "cpus", "CPUs to pin workers to, e.g. 1,2-3")
	fs.DurationVar(&r.cfg.FDBAge, "fdb-age", 300*time.Second, "learned MAC aging time")
	fs.DurationVar(&r.cfg.IdleAfter, "idle-after", vswitch.DefaultIdleAfter, "how long queues stay empty before a worker sleeps in epoll (-1ns: never sleep)")
	fs.StringVar(&r.config, "config", "", "a file of the same settings, one per line: `nic eth0,queues=2`")
}

func (r *runFlags) addNIC(s string) error {
	n, err := portspec.ParseNIC(s)
	r.cfg.NICs = append(r.cfg.NICs, n)
	return err
}

func (r *runFlags) addVhost(s string) error {
	v, err := portspec.ParseVhost(s)
	r.cfg.Vhosts = append(r.cfg.Vhosts, v)
	return err
}

func (r *runFlags) addGen(s string) error {
	g, err := portspec.ParseGen(s)
	r.cfg.Gens = append(r.cfg.Gens, g)
	return err
}

func (r *runFlags) addXConnect(s string) error {
	x, err := portspec.ParseXConnect(s)
	r.cfg.XConnects = append(r.cfg.XConnects, x)
	return err
}

func (r *runFlags) setCPUs(s string) error {
	c, err := portspec.ParseCPUList(s)
	r.cfg.CPUs = c
	return err
}

// readConfigFile applies a config file: each non-empty line not starting
// with # is a flag name and its value, as on the command line. Settings in
// the file come first; flags given on the command line add to or override
// them.
func (r *runFlags) readConfigFile(in io.Reader, name string) error {
	sc := bufio.NewScanner(in)
	line := 0
	for sc.Scan() {
		line++
		s := strings.TrimSpace(sc.Text())
		if s == "" || strings.HasPrefix(s, "#") {
			continue
		}
		key, val, _ := strings.Cut(s, " ")
		val = strings.TrimSpace(val)
		var err error
		switch strings.TrimPrefix(key, "--") {
		case "nic":
			err = r.addNIC(val)
		case "vhost":
			err = r.addVhost(val)
		case "gen":
			err = r.addGen(val)
		case "xconnect":
			err = r.addXConnect(val)
		case "ctl":
			r.cfg.Ctl = val
		case "metrics":
			r.cfg.Metrics = val
		case "workers":
			r.cfg.Workers, err = strconv.Atoi(val)
		case "cpus":
			err = r.setCPUs(val)
		case "idle-after":
			r.cfg.IdleAfter, err = time.ParseDuration(val)
		case "fdb-age":
			r.cfg.FDBAge, err = time.ParseDuration(val)
		default:
			err = fmt.Errorf("unknown setting %q", key)
		}
		if err != nil {
			return fmt.Errorf("%s:%d: %w", name, line, err)
		}
	}
	return sc.Err()
}

// parseRun parses `xvswitch run` arguments, reading --config first.
func parseRun(args []string) (settings, error) {
	// Find --config before the rest so the command line overrides the file.
	pre := flag.NewFlagSet("run", flag.ContinueOnError)
	pre.SetOutput(io.Discard)
	var r runFlags
	r.register(pre)
	_ = pre.Parse(args)
	file := r.config

	r = runFlags{}
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	r.register(fs)
	if file != "" {
		f, err := os.Open(file)
		if err != nil {
			return settings{}, err
		}
		defer f.Close()
		if err := r.readConfigFile(f, file); err != nil {
			return settings{}, err
		}
	}
	if err := fs.Parse(args); err != nil {
		return settings{}, err
	}
	if fs.NArg() > 0 {
		return settings{}, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	for _, g := range r.cfg.Gens {
		p, err := framegen.New(g)
		if err != nil {
			return settings{}, err
		}
		r.cfg.Others = append(r.cfg.Others, vswitch.NamedPort{Name: g.Name, Driver: p})
	}
	err := r.cfg.Validate()
	return r.cfg, err
}
