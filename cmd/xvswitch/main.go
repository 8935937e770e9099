// Command xvswitch is the xvswitch daemon (`xvswitch run`) and its CLI
// (`xvswitch show ...`, `add-port`, `del-port`), which talks to the daemon
// over its control socket.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/xvswitch/xvswitch/ctl"
	"github.com/xvswitch/xvswitch/metrics"
	"github.com/xvswitch/xvswitch/vswitch"
)

const usage = `usage:
  xvswitch run [--nic IFNAME[,queues=N][,mode=auto|copy|zerocopy][,name=NAME]]...
               [--vhost PATH[,client][,queues=N][,mac=MAC][,name=NAME][,mode=0660][,group=kvm]]...
               [--gen NAME,size=N,dst=MAC[,src=MAC]]...  (benchmarks only)
               [--xconnect NAME=NAME]... [--ctl PATH] [--workers N] [--cpus LIST]
               [--metrics ADDR] [--idle-after DURATION] [--config FILE]
  xvswitch show ports|fdb|stats [--json] [--ctl PATH]
  xvswitch add-port --nic SPEC | --vhost SPEC [--ctl PATH]
  xvswitch del-port NAME [--ctl PATH]
`

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "xvswitch:", err)
		if errors.Is(err, errUsage) {
			fmt.Fprint(os.Stderr, usage)
			os.Exit(2)
		}
		os.Exit(1)
	}
}

var errUsage = errors.New("bad usage")

func run(args []string, out io.Writer) error {
	if len(args) == 0 {
		return errUsage
	}
	switch args[0] {
	case "run":
		return daemon(args[1:])
	case "show":
		return show(args[1:], out)
	case "add-port":
		return addPort(args[1:])
	case "del-port":
		return delPort(args[1:])
	case "help", "-h", "--help":
		fmt.Fprint(out, usage)
		return nil
	}
	return fmt.Errorf("%w: unknown command %q", errUsage, args[0])
}

func daemon(args []string) error {
	cfg, err := parseRun(args)
	if err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})))
	sw, err := vswitch.New(cfg.Config)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if cfg.Metrics != "" {
		go func() {
			if err := metrics.Serve(ctx, cfg.Metrics, sw); err != nil {
				slog.Error("metrics endpoint", "err", err)
			}
		}()
	}
	err = sw.Run(ctx)
	slog.Info("xvswitch stopped")
	if err != nil {
		err = withPrivilegeHint(cfg, err)
	}
	return err
}

func show(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("show", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "print JSON")
	sock := fs.String("ctl", ctl.DefaultPath, "control socket")
	if len(args) == 0 {
		return fmt.Errorf("%w: show what? ports, fdb or stats", errUsage)
	}
	what := args[0]
	if err := fs.Parse(args[1:]); err != nil {
		return errUsage
	}
	op := map[string]string{"ports": ctl.OpShowPorts, "fdb": ctl.OpShowFDB, "stats": ctl.OpShowStats}[what]
	if op == "" {
		return fmt.Errorf("%w: show %q", errUsage, what)
	}
	resp, err := ctl.Call(*sock, ctl.Request{Op: op})
	if err != nil {
		return err
	}
	return printShow(out, what, resp, *asJSON)
}

func addPort(args []string) error {
	fs := flag.NewFlagSet("add-port", flag.ContinueOnError)
	nic := fs.String("nic", "", "an AF_XDP port spec")
	vhost := fs.String("vhost", "", "a vhost-user port spec")
	sock := fs.String("ctl", ctl.DefaultPath, "control socket")
	if err := fs.Parse(args); err != nil || fs.NArg() > 0 {
		return errUsage
	}
	_, err := ctl.Call(*sock, ctl.Request{Op: ctl.OpAddPort, NIC: *nic, Vhost: *vhost})
	return err
}

func delPort(args []string) error {
	fs := flag.NewFlagSet("del-port", flag.ContinueOnError)
	sock := fs.String("ctl", ctl.DefaultPath, "control socket")
	if len(args) == 0 {
		return errUsage
	}
	name := args[0]
	if err := fs.Parse(args[1:]); err != nil || fs.NArg() > 0 {
		return errUsage
	}
	_, err := ctl.Call(*sock, ctl.Request{Op: ctl.OpDelPort, Name: name})
	return err
}
