// Package vswitch is the forwarding plane of xvswitch: ports (AF_XDP on a
// NIC, vhost-user towards a VM, or any PortDriver), the learning bridge's
// forwarding database and cross-connects, the poll workers that move
// frames between ports in bursts, the per-port statistics, and the daemon
// side of the control protocol (package ctl).
//
// A port's queues are named from the switch's side: frames enter the
// switch on an ingress queue and leave it on an egress queue; for a VM
// those are the guest's TX and RX virtqueues.
package vswitch
