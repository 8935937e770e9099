package libvirt

import (
	"fmt"
	"strings"
)

// Domain is a transient libvirt domain booting the test guest directly
// from a kernel and initrd (test/qemu's Boot), with vhost-user NICs.
type Domain struct {
	Name string
	// Type is the domain type: "qemu" (TCG, what these machines have) or
	// "kvm".
	Type      string
	MemoryMiB int
	VCPUs     int
	// HugePages backs the shared memfd with 2 MiB huge pages.
	HugePages bool
	// Kernel, Initrd and Cmdline are the direct kernel boot.
	Kernel, Initrd, Cmdline string
	// Disk, instead, boots from a qcow2 image: a VM of a real host (the
	// tests boot a kernel directly), which also gets a console and
	// libvirt's default lifecycle (a reboot restarts it).
	Disk string
	// Serials are files the guest's serial ports write to, ttyS0 first.
	Serials    []string
	Interfaces []Interface
}

// Interface is a vhost-user NIC: <interface type='vhostuser'>.
type Interface struct {
	MAC    string
	Socket string
	// Mode is QEMU's side of the socket, as libvirt names it: "server"
	// (QEMU listens, xvswitch connects with --vhost PATH,client) or
	// "client" (QEMU connects to the socket xvswitch serves).
	Mode string
	// Queues > 1 is multiqueue (libvirt adds mq=on and vectors=2N+2).
	Queues int
	// Packed asks for the packed virtqueue.
	Packed bool
	// Reconnect, in mode "client", makes QEMU reconnect that many
	// seconds after the connection is lost (a switch restart).
	Reconnect int
	// Alias names the device for libvirt (ua-NAME); needed by TCG.
	Alias string
}

// tcg says the domain needs what TCG needs beyond a KVM host: Debian 12's
// QEMU 7.2 under TCG segfaults when a guest starts a vhost-user NIC that
// has MSI-X vectors (docs/testing-peers.md), libvirt has no element for
// virtio-net-pci's vectors property, so the domain sets it to 0 through
// QEMU's namespace (<qemu:override>, which needs each interface's Alias).
func (d *Domain) tcg() bool { return d.Type == "qemu" }

// XML is the domain's XML for `virsh create`.
func (d *Domain) XML() string {
	var b strings.Builder
	ns := ""
	if d.tcg() {
		ns = " xmlns:qemu='http://libvirt.org/schemas/domain/qemu/1.0'"
	}
	fmt.Fprintf(&b, "<domain type='%s'%s>\n", attr(d.Type), ns)
	fmt.Fprintf(&b, "  <name>%s</name>\n", text(d.Name))
	fmt.Fprintf(&b, "  <memory unit='MiB'>%d</memory>\n", d.MemoryMiB)
	fmt.Fprintf(&b, "  <vcpu>%d</vcpu>\n", max(d.VCPUs, 1))
	b.WriteString(indent(MemoryBackingXML(d.HugePages), "  "))
	b.WriteString("  <os>\n    <type arch='x86_64' machine='pc'>hvm</type>\n")
	if d.Disk != "" {
		b.WriteString("    <boot dev='hd'/>\n")
	} else {
		fmt.Fprintf(&b, "    <kernel>%s</kernel>\n    <initrd>%s</initrd>\n    <cmdline>%s</cmdline>\n",
			text(d.Kernel), text(d.Initrd), text(d.Cmdline))
	}
	b.WriteString("  </os>\n")
	// ACPI: the guest powers itself off, and without it has no interrupt
	// routing for a NIC without MSI-X.
	b.WriteString("  <features>\n    <acpi/>\n  </features>\n")
	if d.Type == "kvm" {
		b.WriteString("  <cpu mode='host-passthrough'/>\n")
	}
	if d.Disk == "" {
		// A test guest's run ends when it powers off, whatever happened.
		b.WriteString("  <on_poweroff>destroy</on_poweroff>\n  <on_reboot>destroy</on_reboot>\n  <on_crash>destroy</on_crash>\n")
	}
	b.WriteString("  <devices>\n")
	if d.Disk != "" {
		fmt.Fprintf(&b, "    <disk type='file' device='disk'>\n      <driver name='qemu' type='qcow2'/>\n"+
			"      <source file='%s'/>\n      <target dev='vda' bus='virtio'/>\n    </disk>\n", attr(d.Disk))
	}
	for _, i := range d.Interfaces {
		b.WriteString(indent(i.XML(), "    "))
	}
	for n, f := range d.Serials {
		fmt.Fprintf(&b, "    <serial type='file'>\n      <source path='%s'/>\n      <target port='%d'/>\n    </serial>\n", attr(f), n)
	}
	if d.Disk != "" && len(d.Serials) == 0 {
		b.WriteString("    <console type='pty'/>\n")
	}
	b.WriteString("    <controller type='usb' model='none'/>\n    <memballoon model='none'/>\n  </devices>\n")
	if d.tcg() {
		b.WriteString("  <qemu:override>\n")
		for _, i := range d.Interfaces {
			fmt.Fprintf(&b, "    <qemu:device alias='%s'>\n      <qemu:frontend>\n", attr(i.Alias))
			b.WriteString("        <qemu:property name='vectors' type='unsigned' value='0'/>\n")
			b.WriteString("      </qemu:frontend>\n    </qemu:device>\n")
		}
		b.WriteString("  </qemu:override>\n")
	}
	b.WriteString("</domain>\n")
	return b.String()
}

// MemoryBackingXML is the <memoryBacking> a vhost-user NIC needs: guest
// RAM in a memfd shared with the back-end, on huge pages if asked.
func MemoryBackingXML(hugePages bool) string {
	var b strings.Builder
	b.WriteString("<memoryBacking>\n")
	if hugePages {
		b.WriteString("  <hugepages>\n    <page size='2' unit='M'/>\n  </hugepages>\n")
	}
	b.WriteString("  <source type='memfd'/>\n  <access mode='shared'/>\n</memoryBacking>\n")
	return b.String()
}

// XML is the <interface type='vhostuser'> element.
func (i *Interface) XML() string {
	var b strings.Builder
	b.WriteString("<interface type='vhostuser'>\n")
	fmt.Fprintf(&b, "  <mac address='%s'/>\n", attr(i.MAC))
	src := fmt.Sprintf("  <source type='unix' path='%s' mode='%s'", attr(i.Socket), attr(i.Mode))
	if i.Reconnect > 0 {
		fmt.Fprintf(&b, "%s>\n    <reconnect enabled='yes' timeout='%d'/>\n  </source>\n", src, i.Reconnect)
	} else {
		b.WriteString(src + "/>\n")
	}
	b.WriteString("  <model type='virtio'/>\n")
	var drv []string
	if i.Queues > 1 {
		drv = append(drv, fmt.Sprintf("queues='%d'", i.Queues))
	}
	if i.Packed {
		drv = append(drv, "packed='on'")
	}
	if len(drv) > 0 {
		fmt.Fprintf(&b, "  <driver %s/>\n", strings.Join(drv, " "))
	}
	if i.Alias != "" {
		fmt.Fprintf(&b, "  <alias name='%s'/>\n", attr(i.Alias))
	}
	b.WriteString("</interface>\n")
	return b.String()
}

var (
	attrEsc = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", "'", "&apos;", `"`, "&quot;")
	textEsc = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")
)

func attr(s string) string { return attrEsc.Replace(s) }
func text(s string) string { return textEsc.Replace(s) }

// indent prefixes every line of s with p.
func indent(s, p string) string {
	lines := strings.SplitAfter(s, "\n")
	for i, l := range lines {
		if l != "" {
			lines[i] = p + l
		}
	}
	return strings.Join(lines, "")
}
