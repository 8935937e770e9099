// Command demo is `make demo`: it runs bin/xvswitch as a user would, with
// the README's command line, on a topology it builds and removes itself:
// a network namespace behind a veth pair whose outer end is the NIC (XDP
// and AF_XDP), and a QEMU guest (TCG) whose vhost-user socket xvswitch
// connects to (client mode). It pings the guest from the namespace, streams
// TCP both ways with sha256 compared, prints `xvswitch show` output and
// checks the switch's counters balance. From a terminal it then keeps the
// topology up until Ctrl-C, printing commands to try; otherwise it goes
// straight through. On every way out (the end, an error, Ctrl-C, SIGTERM)
// it stops xvswitch and QEMU and removes the namespace, the veth pair, the
// pins and the sockets. It exits 0 only if every check passed.
//
// The topology comes from the integration harness (test/netns, test/qemu),
// so the demo boots the same cached guest the tests do.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

func main() {
	var opt options
	var outcomeFile string
	flag.StringVar(&opt.xvswitch, "xvswitch", "bin/xvswitch", "the xvswitch binary (`make build` makes bin/xvswitch)")
	flag.StringVar(&opt.ctl, "ctl", "", "xvswitch's control socket (default: xvswitch's own, /run/xvswitch/ctl.sock)")
	flag.StringVar(&outcomeFile, "outcome", "", "write what the run did and saw to this file, as JSON (for its test)")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "demo: unexpected argument %q\n", flag.Arg(0))
		os.Exit(2)
	}
	opt.interactive = isTerminal(os.Stdin)
	os.Exit(runDemo(opt, outcomeFile))
}

// runDemo runs the demo in a goroutine of its own, so a signal can end it
// at any step: the session's context is cancelled (the steps that wait
// return), and after a short grace the teardown runs whatever the demo is
// doing. It returns the exit code.
func runDemo(opt options, outcomeFile string) int {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	// A reader of the demo's output that goes away (make demo | head)
	// must not kill it before it has cleaned up: with SIGPIPE notified,
	// writes fail instead. (Not signal.Ignore: the programs the demo
	// starts would inherit it.)
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	s, err := newSession(os.Stdout)
	if err != nil {
		fmt.Fprintf(os.Stderr, "demo: %v\n", err)
		return 1
	}
	o := &outcome{}
	done := make(chan error, 1)
	go func() { done <- s.run(func() error { demo(s, opt, o); return nil }) }()

	var interrupted os.Signal
	select {
	case err = <-done:
	case interrupted = <-sigs:
		s.cancel()
		select {
		case err = <-done:
		case <-time.After(5 * time.Second):
		}
	}
	switch {
	case interrupted != nil && o.Held:
		interrupted = nil // Ctrl-C is how a held topology ends
	case interrupted != nil:
		fmt.Fprintf(os.Stdout, "==> %v: stopping\n", interrupted)
	}
	if err != nil && interrupted == nil {
		fmt.Fprintf(os.Stdout, "FAILED: %v\n", err)
		o.Err = err.Error()
	}

	go func() {
		for sig := range sigs {
			fmt.Fprintf(os.Stdout, "==> %v: still cleaning up, a moment\n", sig)
		}
	}()
	s.step("cleaning up: %s", strings.Join(o.made(s.dir), ", "))
	s.teardown()
	o.Leftovers = o.leftovers()
	if len(o.Leftovers) > 0 {
		s.Errorf("left behind: %v", o.Leftovers)
	} else {
		s.indent("nothing left behind")
	}
	if outcomeFile != "" {
		if err := o.write(outcomeFile); err != nil {
			fmt.Fprintf(os.Stderr, "demo: %v\n", err)
			return 1
		}
	}
	switch {
	case interrupted == syscall.SIGINT:
		return 130
	case interrupted == syscall.SIGTERM:
		return 143
	case interrupted != nil:
		return 129
	case s.Failed() || err != nil:
		s.step("demo FAILED (see above)")
		return 1
	}
	s.step("demo done")
	return 0
}

// isTerminal reports whether f is a terminal (the demo then waits for
// Ctrl-C before tearing down).
func isTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}
