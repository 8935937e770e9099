// Package ctl is xvswitch's control protocol: the wire types of the
// control socket (one JSON request per connection, one JSON response; a
// capture's response is followed by a stream of its frames, capture.go),
// the client the CLI and the bench harness use, and the socket server the
// daemon runs with its own handler.
//
// It imports nothing of the data path, so a program that only talks to a
// running switch (cmd/xvs-bench) does not link XDP, AF_XDP or vhost code.
package ctl
