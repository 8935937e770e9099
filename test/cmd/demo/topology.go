package main

import (
	"time"

	"github.com/xvswitch/xvswitch/test/qemu"
)

// The demo's topology:
//
//	namespace NS:  INNER 10.92.0.1/24, 10.92.1.2/24 (default offloads, as a container's)
//	   | veth
//	OUTER, the NIC: XDP + AF_XDP (port nic0); 10.92.1.1/24 is the host's own address on it
//	   xvswitch, a learning bridge
//	vhost-user port vm1, client mode: xvswitch connects to QEMU's socket RUNDIR/vm1.sock
//	   QEMU guest (TCG), eth0 52:54:00:92:00:02, 10.92.0.2/24, packed ring
//
// 10.92/16 is the demo's own: no test uses it, so a demo and the tests can
// run at the same time (their namespaces, veths and sockets have unique
// names; the host's own address is in the host's namespace).
const (
	nsAddr     = "10.92.0.1"
	guestAddr  = "10.92.0.2"
	hostAddr   = "10.92.1.1" // the host's own address on the NIC
	nsHostAddr = "10.92.1.2" // the namespace's address towards it
	guestMAC   = "52:54:00:92:00:02"

	portToGuest   = 5001 // the namespace sends to the guest
	portFromGuest = 5002 // the guest sends to the namespace
	portHold      = 5003 // the guest stays up until something connects here

	xferBytes = 2 << 20 // each way
	pings     = 5
)

// switchArgs is xvswitch's command line in the demo, the one the README
// quotes (its test checks they agree): the veth's outer end as a NIC port
// and a vhost-user port in client mode on QEMU's socket. ctl is empty for
// xvswitch's default control socket.
func switchArgs(nic, sock, ctl string) []string {
	args := []string{"run", "--nic", nic + ",name=nic0", "--vhost", sock + ",client,mac=" + guestMAC}
	if ctl != "" {
		args = append(args, "--ctl", ctl)
	}
	return args
}

// guestConfig is the guest's NIC and script: receive from the namespace,
// send to it, then hold (listen) until the demo lets it power off. In a
// terminal it holds for as long as the demo waits for Ctrl-C.
func guestConfig(sock string, holdFor time.Duration) qemu.GuestConfig {
	cfg := qemu.GuestConfig{
		// QEMU listens (server=on,wait=off) and xvswitch connects: client
		// mode, the one docs/vms.md recommends (the VM keeps its link when
		// xvswitch restarts).
		NICs: []qemu.GuestNIC{{Socket: sock, Server: true, MAC: guestMAC, Packed: true, Addr: guestAddr + "/24"}},
		Commands: []qemu.GuestCommand{
			qemu.GuestTCPReceive("from-ns", "", portToGuest, xferBytes),
			qemu.GuestTCPSend("to-ns", "", nsAddr, portFromGuest, xferBytes),
			qemu.GuestTCPReceive("hold", "", portHold, 1),
		},
	}
	// Under TCG on two busy CPUs 2 MiB can take tens of seconds.
	cfg.Commands[0].Timeout = 90 * time.Second
	cfg.Commands[1].Timeout = 90 * time.Second
	cfg.Commands[2].Timeout = holdFor
	return cfg
}
