// Package portspec parses the textual port specifications of xvswitch:
// the values of `--nic`, `--vhost`, `--gen` and `--xconnect` (on the
// command line, in a config file, or sent by `xvswitch add-port` over the
// control socket) and the worker CPU list. The daemon and the CLI both
// parse with it, so a spec means the same wherever it is written.
package portspec
