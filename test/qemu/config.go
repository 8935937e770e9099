package qemu

import (
	"fmt"
	"time"
)

// Toggle is a virtio-net device property that is on, off, or left at
// QEMU's default (mrg_rxbuf, indirect_desc and event_idx default to on).
type Toggle int8

// Toggle values.
const (
	ToggleDefault Toggle = iota
	ToggleOn
	ToggleOff
)

func (t Toggle) qemu() string {
	switch t {
	case ToggleOn:
		return "on"
	case ToggleOff:
		return "off"
	}
	return ""
}

// GuestNIC is one virtio-net NIC of a guest. With Socket set it is a
// vhost-user NIC (the real use); otherwise Netdev names another QEMU
// back-end (e.g. "hubport,hubid=0", to wire two NICs of one guest together
// without any vhost-user back-end: the harness's own self-test).
type GuestNIC struct {
	// Socket is the vhost-user socket path (at most 107 bytes).
	Socket string
	// Server makes QEMU listen on Socket (server=on,wait=off): for a
	// back-end in vhost-user client mode. The guest then boots without a
	// back-end and its NIC has no carrier until one connects.
	Server bool
	// Reconnect, in client mode, makes QEMU retry connecting every
	// Reconnect seconds instead of exiting when the back-end is not
	// listening yet (QEMU blocks before the guest starts until it is).
	Reconnect int
	// Netdev, when Socket is empty, is a QEMU -netdev spec without its id.
	Netdev string

	// MAC is the NIC's address; empty picks a unique 52:54:00:... one.
	MAC string
	// Packed selects the packed virtqueue (packed=on); false is split.
	Packed                           bool
	MrgRxbuf, IndirectDesc, EventIdx Toggle
	// MTU, when non-zero, is offered to the guest (host_mtu=, feature
	// VIRTIO_NET_F_MTU); the guest's interface takes it as its MTU.
	MTU int
	// Queues > 1 enables multiqueue (mq=on). The guest driver only uses
	// min(Queues, guest CPUs) pairs; GuestConfig.CPUs defaults to the
	// largest Queues.
	Queues int
	// DeviceOpts are extra virtio-net-pci properties ("csum=off", ...).
	DeviceOpts []string

	// Addr is the guest's address on this NIC, CIDR ("10.0.0.1/24").
	Addr string
	// Netns, when set, moves the NIC into a network namespace of that name
	// inside the guest (NICs naming the same one share it). Two NICs of
	// one guest in different namespaces talk only across the back-end,
	// never through the guest's loopback.
	Netns string
	// Neigh are static ARP entries, IPv4 address -> MAC.
	Neigh map[string]string
	// IPv6 keeps IPv6 on; by default it is disabled so the guest sends no
	// router solicitations or MLD reports that would skew frame counts.
	IPv6 bool
	// CarrierWait is how long the guest waits for carrier before running
	// its commands (default 10 s).
	CarrierWait time.Duration
}

// GuestCommand is one thing the guest runs, in order, after its NICs are
// up. Build them with GuestPing, GuestTCP, GuestTCPReceive, GuestTCPSend or
// GuestShell, then adjust fields if needed.
type GuestCommand struct {
	// Name identifies the result; letters, digits, '-' and '_' only.
	Name string
	Kind GuestCommandKind
	// Netns is where the command runs (for GuestTCP: the client's side).
	Netns string
	// Target is the address pinged, connected to, or (GuestTCP) served on.
	Target string
	// Count and Size are ping's -c and -s; Interval its -i (default 0.2 s).
	Count, Size int
	Interval    time.Duration
	// Port and Bytes shape a TCP transfer.
	Port, Bytes int
	// ServerNetns is the server's namespace of a GuestTCP transfer.
	ServerNetns string
	// Script is GuestShell's sh -c script.
	Script string
	// Timeout bounds the command inside the guest (default 20 s).
	Timeout time.Duration
}

// GuestCommandKind says what a GuestCommand does.
type GuestCommandKind int

// Kinds of guest command.
const (
	CmdShell GuestCommandKind = iota
	CmdPing
	CmdTCP
	CmdTCPReceive
	CmdTCPSend
)

// GuestPing pings target count times with size data bytes from namespace
// netns. Its result is OK only if every ping was answered.
func GuestPing(name, netns, target string, count, size int) GuestCommand {
	return GuestCommand{Name: name, Kind: CmdPing, Netns: netns, Target: target, Count: count, Size: size}
}

// GuestTCP sends bytes random bytes over TCP inside the guest: a busybox nc
// server listens on serverAddr:port in serverNetns, a client in
// clientNetns connects and sends. OK means the server got every byte
// (sha256 compared inside the guest; both sums are in the result).
func GuestTCP(name, serverNetns, serverAddr, clientNetns string, port, bytes int) GuestCommand {
	return GuestCommand{Name: name, Kind: CmdTCP, ServerNetns: serverNetns, Target: serverAddr,
		Netns: clientNetns, Port: port, Bytes: bytes}
}

// GuestTCPReceive listens on port in netns for a peer outside the guest and
// reports how many bytes arrived and their sha256. The guest prints
// "XVS-READY name=<name>" once it listens (see Guest.WaitReady). bytes > 0
// requires exactly that many.
func GuestTCPReceive(name, netns string, port, bytes int) GuestCommand {
	return GuestCommand{Name: name, Kind: CmdTCPReceive, Netns: netns, Port: port, Bytes: bytes}
}

// GuestTCPSend connects from netns to target:port (retrying until the peer
// listens or the timeout) and sends bytes random bytes; the result carries
// their sha256 for the peer to compare.
func GuestTCPSend(name, netns, target string, port, bytes int) GuestCommand {
	return GuestCommand{Name: name, Kind: CmdTCPSend, Netns: netns, Target: target, Port: port, Bytes: bytes}
}

// GuestShell runs script with sh -c in netns; OK is exit status 0 and the
// output comes back in the result's Output.
func GuestShell(name, netns, script string) GuestCommand {
	return GuestCommand{Name: name, Kind: CmdShell, Netns: netns, Script: script}
}

// GuestConfig describes a guest run.
type GuestConfig struct {
	NICs     []GuestNIC
	Commands []GuestCommand
	// Timeout bounds the whole run, QEMU start to exit; QEMU is killed
	// when it passes (default 90 s). A guest normally powers off by itself.
	Timeout time.Duration
	// MemoryMB is the guest's RAM, shared memfd (default 256).
	MemoryMB int
	// MemoryKB, if set, is the guest's RAM in KiB instead, a multiple
	// of 8 (QEMU rounds RAM up to 8 KiB). The migration test uses a size
	// that is not a multiple of 256 KiB, to keep QEMU 7.2's TCG from
	// losing dirty pages (docs/vms.md, "Live migration"). Not with
	// HugePages.
	MemoryKB int
	// HugePages puts that memfd on 2 MiB huge pages (hugetlb=on): the
	// host needs MemoryMB/2 of them free (ReserveHugePages).
	HugePages bool
	// CPUs is the guest's vCPU count (default: the largest NIC Queues, at
	// least 1). Under TCG each vCPU is a host thread.
	CPUs int
	// KernelArgs are appended to the kernel command line.
	KernelArgs []string
	// QEMUArgs are appended to QEMU's command line.
	QEMUArgs []string
	// Files are laid into the guest beside the run's script, as
	// /xvs/NAME (executable), from the host file each name maps to:
	// programs GuestTool built, for commands to run.
	Files map[string]string
	// Monitor gives QEMU a QMP socket (Guest.QMPPath) for a test that
	// drives it (live migration: migrate.go).
	Monitor bool
	// Incoming, when set, starts QEMU waiting for a migration stream on
	// that URI ("unix:/path") instead of booting: StartIncoming.
	Incoming string
}

func (c *GuestConfig) validate() error {
	seen := map[string]bool{}
	for i, cmd := range c.Commands {
		if !validName(cmd.Name) {
			return fmt.Errorf("command %d: name %q: want letters, digits, '-' or '_'", i, cmd.Name)
		}
		if seen[cmd.Name] {
			return fmt.Errorf("command %d: name %q used twice", i, cmd.Name)
		}
		seen[cmd.Name] = true
	}
	for i, n := range c.NICs {
		if n.Socket == "" && n.Netdev == "" {
			return fmt.Errorf("nic %d: neither Socket nor Netdev set", i)
		}
		if len(n.Socket) > 107 {
			return fmt.Errorf("nic %d: socket path longer than 107 bytes: %s", i, n.Socket)
		}
		if n.Netns != "" && !validName(n.Netns) {
			return fmt.Errorf("nic %d: netns %q: want letters, digits, '-' or '_'", i, n.Netns)
		}
		if n.Server && n.Reconnect > 0 {
			return fmt.Errorf("nic %d: Reconnect only applies in client mode", i)
		}
	}
	for name := range c.Files {
		if !validName(name) {
			return fmt.Errorf("file %q: want letters, digits, '-' or '_'", name)
		}
	}
	return nil
}

func validName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return false
		}
	}
	return true
}
