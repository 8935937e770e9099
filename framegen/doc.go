// Package framegen is a benchmark-only port kind, the frame generator
// behind `xvswitch run --gen NAME,size=N,dst=MAC`: the bench harness
// (cmd/xvs-bench) uses it to measure "switch -> VM" and as the traffic
// source on the wire side of "NIC -> VM". It is not for production: it
// sends as fast as a worker polls it, forever, and its worker never
// sleeps. It lives in the daemon's binary so that `make bench` measures
// the same bin/xvswitch users run.
//
// Its ingress queue hands the worker a full burst of one prebuilt frame on
// every poll (all frames of the burst point at the same bytes:
// destinations only read them, so nothing is copied until a destination
// port transmits). Its egress queue is a sink: whatever the switch sends
// to the port is counted as transmitted and discarded.
package framegen
