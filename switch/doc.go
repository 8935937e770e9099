// Package vswitch is the forwarding plane of xvswitch: ports (AF_XDP on a
// NIC, vhost-user towards a VM), the learning bridge's forwarding database
// and cross-connects, the poll workers that move frames between ports in
// bursts, the per-port statistics and the control server the CLI talks to.
//
// Its directory is switch/, but switch is a Go keyword, so the package is
// named vswitch.
package vswitch
