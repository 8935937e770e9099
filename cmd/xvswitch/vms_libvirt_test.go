package main

import (
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/xvswitch/xvswitch/test/libvirt"
	"github.com/xvswitch/xvswitch/test/netns"
	"github.com/xvswitch/xvswitch/test/qemu"
	"github.com/xvswitch/xvswitch/test/require"
)

// The libvirt topology (docs/vms.md, "libvirt"):
//
//	namespace (10.96.0.1) -- veth -- [NIC port nic0]
//	    xvswitch (learning bridge)
//	[vm1: xvswitch connects to the socket libvirt's QEMU serves, mode='server']
//	    -- eth0 (10.96.0.2), split ring, 2 queue pairs
//	[vm2: libvirt's QEMU connects to xvswitch's socket, mode='client']
//	    -- eth1 (10.96.0.3) in the guest's namespace "far", packed ring
//
// One domain, both socket modes: eth0 and eth1 reach each other only
// through the switch, and both reach the namespace behind the NIC.
const (
	lvNICAddr = "10.96.0.1"
	lvVM1Addr = "10.96.0.2"
	lvVM2Addr = "10.96.0.3"
	lvVM1MAC  = "52:54:00:96:00:02"
	lvVM2MAC  = "52:54:00:96:00:03"
)

// qemuSockDirMode is the mode of the directory QEMU makes its sockets in
// (group kvm): set-group-ID, so they are kvm's too, and group-writable,
// so QEMU's user (in kvm) may make them (examples/vhost-user.tmpfiles.conf).
const qemuSockDirMode = 0o2770

// lvSwitchPorts are xvswitch's vhost ports for the domain: vm1 a client of
// the socket QEMU listens on, vm2 served for QEMU to connect to, readable
// by the kvm group QEMU runs in.
func lvSwitchPorts(qemuSock, xvsSock string) []string {
	return []string{
		"--vhost", qemuSock + ",client,queues=2,mac=" + lvVM1MAC + ",name=vm1",
		"--vhost", xvsSock + ",mode=0660,group=kvm,mac=" + lvVM2MAC + ",name=vm2",
	}
}

// lvInterfaces are the domain's two vhost-user interfaces.
func lvInterfaces(qemuSock, xvsSock string) []libvirt.Interface {
	return []libvirt.Interface{
		{MAC: lvVM1MAC, Socket: qemuSock, Mode: "server", Queues: 2, Alias: "ua-vm1"},
		{MAC: lvVM2MAC, Socket: xvsSock, Mode: "client", Reconnect: 1, Packed: true, Alias: "ua-vm2"},
	}
}

// lvDomain is the domain the test boots (boot: test/qemu's kernel, initrd
// and command line; serials: the console and report files), its RAM a
// shared memfd on 4 KiB or 2 MiB pages.
func lvDomain(kernel, initrd, cmdline string, serials []string, qemuSock, xvsSock string, hugePages bool) *libvirt.Domain {
	return &libvirt.Domain{Type: "qemu", MemoryMiB: 256, VCPUs: 2, HugePages: hugePages,
		Kernel: kernel, Initrd: initrd, Cmdline: cmdline, Serials: serials,
		Interfaces: lvInterfaces(qemuSock, xvsSock)}
}

// lvGuest is what the guest does: pings to the NIC's namespace from both
// NICs, between them through the switch, and a TCP stream eth0 -> eth1.
func lvGuest(qemuSock, xvsSock string) qemu.GuestConfig {
	queues := "for d in /sys/class/net/*; do if [ \"$(cat $d/address)\" = " + lvVM1MAC + " ]; then ls $d/queues; fi; done"
	return qemu.GuestConfig{
		NICs: []qemu.GuestNIC{
			{Socket: qemuSock, MAC: lvVM1MAC, Queues: 2, Addr: lvVM1Addr + "/24"},
			{Socket: xvsSock, MAC: lvVM2MAC, Packed: true, Addr: lvVM2Addr + "/24", Netns: "far"},
		},
		Commands: []qemu.GuestCommand{
			qemu.GuestPing("vm1-to-nic", "", lvNICAddr, 5, 56),
			qemu.GuestPing("vm2-to-nic", "far", lvNICAddr, 5, 56),
			qemu.GuestPing("vm1-to-vm2", "", lvVM2Addr, 5, 56),
			qemu.GuestTCP("tcp", "far", lvVM2Addr, "", 5001, 256*1024),
			qemu.GuestShell("queues", "", queues),
		},
	}
}

// TestVMsLibvirt boots a libvirt domain (system instance, TCG) whose two
// vhost-user interfaces are on xvswitch, one in each socket mode, next to
// a veth NIC port, its RAM a shared memfd on normal or on huge pages:
// every ping and the TCP stream must arrive, the ring kinds and queues
// must be what the XML asked, each port must have carried the traffic and
// the switch's counters must balance.
func TestVMsLibvirt(t *testing.T) {
	require.Long(t)
	require.Root(t)
	require.Commands(t, "virsh", "libvirtd", "virtlogd", "qemu-system-x86_64", "ping")
	kvm, err := user.LookupGroup("kvm")
	if err != nil {
		require.SkipOrFail(t, "needs the kvm group libvirt's QEMU runs in (Debian's qemu-system-x86 creates it)")
	}
	gid, _ := strconv.Atoi(kvm.Gid)
	qemu.EnsureGuest(t)
	conn := libvirt.Connect(t)
	if len(conn.Started) > 0 {
		t.Logf("no libvirtd was running: started %s in the foreground", strings.Join(conn.Started, " and "))
	}
	for _, huge := range []bool{false, true} {
		name := "memfd"
		if huge {
			name = "hugepages"
		}
		t.Run(name, func(t *testing.T) { runLibvirtDomain(t, conn, gid, huge) })
	}
}

func runLibvirtDomain(t *testing.T, conn *libvirt.Conn, kvmGID int, hugePages bool) {
	if hugePages {
		qemu.ReserveHugePages(t, 128) // the domain's 256 MiB
	}
	// QEMU runs as libvirt-qemu: everything it opens by path must be
	// reachable by that user, so not under t.TempDir (0700).
	base, err := os.MkdirTemp("", "xvs-vms-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	qemuDir, xvsDir := filepath.Join(base, "vhost-user"), filepath.Join(base, "xvswitch")
	mkdir(t, base, 0o755, -1)
	mkdir(t, qemuDir, qemuSockDirMode, kvmGID) // QEMU makes its sockets here
	mkdir(t, xvsDir, 0o755, -1)                // xvswitch makes its sockets here
	qemuSock, xvsSock := filepath.Join(qemuDir, "vm1.sock"), filepath.Join(xvsDir, "vm2.sock")

	v := netns.NewVeth(t, netns.VethOptions{InnerAddr: lvNICAddr + "/24"})
	d := startDaemon(t, append([]string{"--nic", v.Outer + ",mode=copy,name=nic0"}, lvSwitchPorts(qemuSock, xvsSock)...)...)

	// libvirt relabels the kernel and initrd for its QEMU (dynamic
	// ownership): give it copies, not the shared cache.
	gcfg := lvGuest(qemuSock, xvsSock)
	boot := qemu.PrepareBoot(t, gcfg, base)
	kernel := filepath.Join(base, "vmlinux")
	copyFile(t, boot.Kernel, kernel)
	console, reports := filepath.Join(base, "console.log"), filepath.Join(base, "reports.log")
	dom := lvDomain(kernel, boot.Initrd, boot.Cmdline, []string{console, reports}, qemuSock, xvsSock, hugePages)
	run := conn.Create(t, dom, base)
	t.Logf("domain %s running; sockets:\n%s", run.Name, lsSockets(t, qemuSock, xvsSock))
	// QEMU's socket takes the directory's group, group-writable (QEMU's
	// umask is 002): an xvswitch in that group may connect. libvirt left
	// xvswitch's socket as xvswitch made it.
	requireSocket(t, qemuSock, kvmGID, 0o020)
	requireSocket(t, xvsSock, kvmGID, 0o660)
	waitPortsReady(t, d, 60*time.Second, "vm1", "vm2")
	t.Logf("xvswitch show ports:\n%s", d.cli(t, "show", "ports"))
	if n := qemu.HugePagesTaken(t); hugePages && n < 128 {
		t.Errorf("the domain runs, but only %d huge pages are taken: its RAM is not on them", n)
	}
	took, ended := run.Wait(90 * time.Second)
	r := boot.Run(console, reports, took)
	if !ended {
		t.Fatalf("the domain still ran after %v:\n%s", took.Round(time.Second), r.Console)
	}
	t.Logf("domain ran %v; guest script from uptime %.2fs to %.2fs", took.Round(time.Millisecond), r.BeginUptime, r.EndUptime)
	r.RequireOK(t, gcfg)
	for _, name := range []string{"vm1-to-nic", "vm1-to-vm2"} {
		t.Logf("%s: %s", name, lastLines(strings.Join(r.Result(name).Output, "\n"), 2))
	}
	if r.HasFeature(0, qemu.VirtioFRingPacked) || !r.HasFeature(1, qemu.VirtioFRingPacked) {
		t.Errorf("ring kinds: want eth0 split, eth1 packed: %s / %s", r.NIC(0).Features, r.NIC(1).Features)
	}
	if q := strings.Join(r.Result("queues").Output, " "); !strings.Contains(q, "rx-1") {
		t.Errorf("vm1 should have two queue pairs: %q", q)
	}

	time.Sleep(300 * time.Millisecond) // the last bursts' counters
	t.Logf("xvswitch show stats:\n%s", d.cli(t, "show", "stats"))
	st := d.stats(t)
	checkBalance(t, st)
	// Each port carried at least its pings each way.
	for name, min := range map[string]uint64{"nic0": 10, "vm1": 10, "vm2": 10} {
		if p := port(st, name); p.RxPackets < min || p.TxPackets < min {
			t.Errorf("port %s: rx %d tx %d, want at least %d each way", name, p.RxPackets, p.TxPackets, min)
		}
	}
}

// vmsExample is the example domain for a KVM host, generated from the
// tested setup (vms_doc_test.go).
const vmsExample = "../../examples/libvirt-vm.xml"

// TestVMsLibvirtExample: examples/libvirt-vm.xml (the tested interfaces
// and memory in a KVM domain that boots from a disk) is a domain libvirt
// accepts: `virsh define --validate` checks it against libvirt's schema
// and parses it (a KVM domain can be defined without KVM); it is
// undefined again at once.
func TestVMsLibvirtExample(t *testing.T) {
	require.Long(t)
	conn := libvirt.Connect(t)
	b, err := os.ReadFile(vmsExample)
	if err != nil {
		t.Fatal(err)
	}
	name := "xvs-example-" + strconv.Itoa(os.Getpid())
	xml := strings.Replace(string(b), "<name>vm1</name>", "<name>"+name+"</name>", 1)
	file := filepath.Join(t.TempDir(), "vm.xml")
	if err := os.WriteFile(file, []byte(xml), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := conn.Define(t, file, name)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s", out)
}

// requireSocket fails t unless the socket file at path has group gid and
// at least the permission bits perm.
func requireSocket(t *testing.T, path string, gid int, perm uint32) {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	if int(st.Gid) != gid || st.Mode&perm != perm || st.Mode&unix.S_IFMT != unix.S_IFSOCK {
		t.Errorf("%s: mode %o group %d, want a socket of group %d with at least %o", path, st.Mode, st.Gid, gid, perm)
	}
}
