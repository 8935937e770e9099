package main

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/xvswitch/xvswitch/ctl"
	"github.com/xvswitch/xvswitch/framegen"
	"github.com/xvswitch/xvswitch/portspec"
	"github.com/xvswitch/xvswitch/vswitch"
)

// settings is everything `xvswitch run` is told, by options or a config
// file: the switch's configuration and what the daemon around it runs.
type settings struct {
	vswitch.Config
	Gens      []portspec.Gen // benchmark-only generator ports (framegen)
	Metrics   string         // address of the Prometheus endpoint (":9417"); empty: none
	LogLevel  string         // debug, info, warn or error
	LogFormat string         // text or json
}

// runFlags collects `xvswitch run` options. Options that name ports repeat.
type runFlags struct {
	cfg    settings
	config string
	// checkHost also checks values against this host: that a --nic
	// interface exists, that --cpus are CPUs this process may run on.
	// The daemon sets it; tests of the parser run anywhere without it.
	checkHost bool
}

func newRunFlags() *runFlags {
	r := &runFlags{}
	r.cfg.Ctl = ctl.DefaultPath
	r.cfg.Workers = 1
	r.cfg.FDBAge = 300 * time.Second
	r.cfg.IdleAfter = vswitch.DefaultIdleAfter
	r.cfg.RxBackoff = vswitch.DefaultRxBackoff
	r.cfg.LogLevel = "info"
	r.cfg.LogFormat = "text"
	return r
}

func (r *runFlags) options() []option {
	return []option{
		{section: "ports (each option repeats)", name: "nic", value: "IFNAME[,queues=N][,mode=auto|copy|zerocopy][,csum=auto|fix|off][,maxmacs=N][,vlan=N][,trunk=N+M+...][,name=NAME]",
			help: "an AF_XDP port on a NIC, one socket per queue (all its queues by default); mode=auto tries zero-copy and falls back to copy; vlan and trunk: as for --vhost",
			set:  r.addNIC},
		{name: "vhost", value: "PATH[,client][,queues=N][,mac=MAC][,spoof=allow][,maxmacs=N][,offloads=off][,own=IFNAME:Q[+Q]][,vlan=N][,trunk=N+M+...][,name=NAME][,mode=0660][,group=kvm]",
			help: "a vhost-user virtio-net port for a VM, named after its socket file; client: connect to QEMU's server=on socket and reconnect (the mode to use), otherwise serve the socket; own: the NIC queues the VM owns (needs mac=; docs/zerocopy.md); mode and group: the served socket file's permissions; vlan=N: an access port, untagged on the port's side and in VLAN N in the switch; trunk=N+M+...: the VLANs it carries, tagged (with vlan=N, N is its native VLAN, untagged; docs/vlans.md)",
			set:  appendParsed(&r.cfg.Vhosts, portspec.ParseVhost)},
		{name: "xconnect", value: "NAME=NAME",
			help: "cross-connect two ports: everything one receives goes out of the other (no learning, no flooding)",
			set:  appendParsed(&r.cfg.XConnects, portspec.ParseXConnect)},
		{name: "gen", value: "NAME,size=N,dst=MAC[,src=MAC]",
			help: "benchmarks only: a port that generates frames as fast as it is polled",
			set:  appendParsed(&r.cfg.Gens, portspec.ParseGen)},
		{section: "forwarding", name: "workers", value: "N", help: fmt.Sprintf("poll workers, 1..%d", vswitch.MaxWorkers), def: "1", set: r.setWorkers},
		{name: "cpus", value: "LIST", help: "CPUs to pin the workers to, round robin: a list such as 2-3 or 0,2,4", set: r.setCPUs},
		{name: "fdb-age", value: "DURATION", help: "how long a learned MAC stays without a frame from it", def: "5m0s", set: r.setFDBAge},
		{name: "idle-after", value: "DURATION",
			help: "how long a worker's queues stay empty before it sleeps in epoll; -1ns: never sleep",
			def:  vswitch.DefaultIdleAfter.String(), set: r.setIdleAfter},
		{name: "rx-backoff", value: "DURATION",
			help: "how long a VM's receive queue leaves its ring alone after a burst found no buffers there, counting frames for it as no_rx_buffers, so that frames coming faster than the guest takes them do not slow its refill; 0: never",
			def:  vswitch.DefaultRxBackoff.String(), set: r.setRxBackoff},
		{section: "daemon", name: "config", value: "FILE",
			help: "read settings from FILE first: one per line, an option without its dashes and its value ('nic eth1,queues=2'), and comments after a #; the command line adds to or overrides them",
			set:  r.setConfig},
		{name: "ctl", value: "PATH", help: "the control socket the other commands talk to", def: ctl.DefaultPath, set: r.setCtl},
		{name: "ctl-mode", value: "OCTAL", help: "the control socket's permissions; its owner is the daemon's user", def: "0660", set: r.setCtlMode},
		{name: "ctl-group", value: "NAME|GID",
			help: "the control socket's group (default: the daemon's), whose members may use the CLI; a name is looked up in /etc/group (the static build has no NSS), so a group only NSS knows (LDAP, sssd) is given by its GID",
			set:  r.setCtlGroup},
		{name: "metrics", value: "ADDR", help: "serve Prometheus metrics at http://ADDR/metrics, e.g. 127.0.0.1:9417", set: r.setMetrics},
		{name: "log-level", value: "debug|info|warn|error", help: "the least important log lines written, to stderr", def: "info", set: r.setLogLevel},
		{name: "log-format", value: "text|json", help: "log lines as key=value text or as one JSON object each", def: "text", set: r.setLogFormat},
	}
}

func (r *runFlags) addNIC(s string) error {
	n, err := portspec.ParseNIC(s)
	if err != nil {
		return err
	}
	if r.checkHost {
		if err := checkInterface(n.Ifname); err != nil {
			return err
		}
	}
	r.cfg.NICs = append(r.cfg.NICs, n)
	return nil
}

// appendParsed is the setter of an option that repeats: each value is
// parsed and added to *list.
func appendParsed[T any](list *[]T, parse func(string) (T, error)) func(string) error {
	return func(s string) error {
		v, err := parse(s)
		if err != nil {
			return err
		}
		*list = append(*list, v)
		return nil
	}
}

func (r *runFlags) setWorkers(s string) error {
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > vswitch.MaxWorkers {
		return fmt.Errorf("want a number of poll workers, 1..%d", vswitch.MaxWorkers)
	}
	r.cfg.Workers = n
	return nil
}

func (r *runFlags) setCPUs(s string) error {
	c, err := portspec.ParseCPUList(s)
	if err != nil {
		return err
	}
	if r.checkHost {
		if err := checkCPUs(c); err != nil {
			return err
		}
	}
	r.cfg.CPUs = c
	return nil
}

func (r *runFlags) setFDBAge(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return fmt.Errorf("want a duration above zero, like 300s or 5m")
	}
	r.cfg.FDBAge = d
	return nil
}

func (r *runFlags) setIdleAfter(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil || d == 0 {
		return fmt.Errorf("want a duration, like 10ms or 1s, or -1ns never to sleep")
	}
	r.cfg.IdleAfter = d
	return nil
}

func (r *runFlags) setRxBackoff(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return fmt.Errorf("want a duration, like 1us, or 0 never to back off")
	}
	if d == 0 {
		d = -1 // vswitch.Config's 0 is the default
	}
	r.cfg.RxBackoff = d
	return nil
}

func (r *runFlags) setConfig(s string) error {
	r.config = s
	return nil
}

func (r *runFlags) setCtl(s string) error {
	if s == "" {
		return fmt.Errorf("want the path of a socket")
	}
	r.cfg.Ctl = s
	return nil
}

func (r *runFlags) setCtlMode(s string) error {
	m, err := portspec.ParseMode(s)
	r.cfg.CtlMode = m
	return err
}

func (r *runFlags) setCtlGroup(s string) error {
	gid, err := portspec.ParseGroup(s)
	if err != nil {
		return fmt.Errorf("no such group (want a group name or GID): %v", err)
	}
	r.cfg.CtlGID = gid
	return nil
}

func (r *runFlags) setMetrics(s string) error {
	if _, port, err := net.SplitHostPort(s); err != nil || port == "" {
		return fmt.Errorf("want HOST:PORT, like 127.0.0.1:9417 (or :9417 for every address)")
	}
	r.cfg.Metrics = s
	return nil
}

func (r *runFlags) setLogLevel(s string) error {
	if _, err := parseLevel(s); err != nil {
		return err
	}
	r.cfg.LogLevel = s
	return nil
}

func (r *runFlags) setLogFormat(s string) error {
	if s != "text" && s != "json" {
		return fmt.Errorf("want text or json")
	}
	r.cfg.LogFormat = s
	return nil
}

// parseRun parses `xvswitch run` arguments: the config file first, then
// the command line over it.
func parseRun(args []string) (settings, error) {
	return newRunFlags().parse(args)
}

func (r *runFlags) parse(args []string) (settings, error) {
	opts := r.options()
	as, pos, err := parseArgs(args, opts)
	if err != nil {
		return settings{}, err
	}
	if len(pos) > 0 {
		return settings{}, usagef("unexpected argument %q: run takes only options", pos[0])
	}
	for _, a := range as {
		if a.opt.name == "config" {
			r.config = a.value
		}
	}
	if r.config != "" {
		if err := r.readConfigFile(r.config, opts); err != nil {
			return settings{}, err
		}
	}
	if err := apply(as); err != nil {
		return settings{}, err
	}
	for _, g := range r.cfg.Gens {
		p, err := framegen.New(g)
		if err != nil {
			return settings{}, usagef("--gen %s: %v", g.Name, err)
		}
		r.cfg.Others = append(r.cfg.Others, vswitch.NamedPort{Name: g.Name, Driver: p})
	}
	if err := r.cfg.Validate(); err != nil {
		// "vswitch: bad configuration: ..." names the package, not the problem.
		return settings{}, usagef("%s", strings.TrimPrefix(err.Error(), "vswitch: "))
	}
	return r.cfg, nil
}
