package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"github.com/xvswitch/xvswitch/metrics"
	"github.com/xvswitch/xvswitch/vswitch"
)

var runCommand = &command{
	name:     "run",
	synopsis: "[OPTIONS]",
	summary:  "run the switch (the daemon) until SIGINT or SIGTERM",
	about: `Runs the switch. NIC ports get an XDP program, which steers to the switch
only the frames for its VMs' MACs, an AF_XDP socket per queue, and an
AF_PACKET socket for copies of the broadcast and multicast the host keeps;
vhost-user ports connect to the socket of a VM's QEMU (client, recommended:
the VM keeps its link when xvswitch restarts) or serve one for it. Ports
form a learning bridge unless cross-connected. SIGINT or SIGTERM stop it
cleanly: XDP detached, pins and sockets removed. The other commands talk
to it on the control socket.

NIC ports need root, or the capabilities CAP_NET_ADMIN, CAP_NET_RAW, CAP_BPF
and CAP_PERFMON and locked memory for their UMEM (docs/privileges.md);
every socket needs a directory xvswitch may write.

example:
  xvswitch run --nic eth1 --vhost /run/vm1.sock,client,mac=52:54:00:00:00:01 \
               --vhost /run/vm2.sock,queues=2 --workers 2 --cpus 2-3
`,
	options: func() []option { return newRunFlags().options() },
	run:     daemon,
}

// daemon is `xvswitch run`. Once its logger is set up, everything it has
// to say, a fatal error included, is a log line, and "xvswitch stopped"
// is the last.
func daemon(args []string, _, errOut io.Writer) error {
	r := newRunFlags()
	r.checkHost = true
	cfg, err := r.parse(args)
	if err != nil {
		return err
	}
	level, _ := parseLevel(cfg.LogLevel)
	slog.SetDefault(newLogger(errOut, level, cfg.LogFormat))
	err = serve(cfg)
	if err != nil {
		slog.Error("xvswitch failed", "err", explainRun(cfg, err))
	}
	slog.Info("xvswitch stopped")
	if err != nil {
		return errReported
	}
	return nil
}

// serve builds the switch and runs it, and the metrics endpoint, until
// SIGINT or SIGTERM. The metrics address is taken first: one the daemon
// cannot have is fatal before anything is set up.
func serve(cfg settings) error {
	var ml net.Listener
	if cfg.Metrics != "" {
		l, err := listenMetrics(cfg.Metrics)
		if err != nil {
			return err
		}
		defer l.Close()
		ml = l
	}
	// systemd's Type=notify: ready once the ports are up and the control
	// socket listens; stopping as soon as a signal asks.
	cfg.Config.Ready = func() { notify("READY=1") }
	sw, err := vswitch.New(cfg.Config)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	context.AfterFunc(ctx, func() { notify("STOPPING=1") })
	if ml != nil {
		go func() {
			if err := metrics.Serve(ctx, ml, sw, metricsBuild()); err != nil {
				slog.Error("metrics endpoint", "err", err)
			}
		}()
	}
	return sw.Run(ctx)
}

// notify sends a state to the service manager; not reaching it is worth a
// warning, never a failure (systemd then says why the unit never started).
func notify(state string) {
	if err := sdNotify(state); err != nil {
		slog.Warn("cannot notify the service manager", "err", err)
	}
}

// listenMetrics listens on --metrics' address, or says why it cannot
// (address already in use, cannot assign requested address, ...).
func listenMetrics(addr string) (net.Listener, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		var errno syscall.Errno
		if errors.As(err, &errno) {
			err = errno
		}
		return nil, fmt.Errorf("--metrics %s: cannot serve metrics there: %w", addr, err)
	}
	return l, nil
}

// metricsBuild is this binary's version and commit, for the metrics'
// xvswitch_build_info.
func metricsBuild() metrics.Build {
	bi, _ := debug.ReadBuildInfo()
	s := readStamp(version, commit, bi)
	return metrics.Build{Version: s.release, Commit: s.rev}
}
