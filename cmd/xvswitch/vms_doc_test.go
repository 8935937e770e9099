package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/xvswitch/xvswitch/test/libvirt"
	"github.com/xvswitch/xvswitch/test/qemu"
)

var updateDocs = flag.Bool("update-docs", false, "rewrite docs/vms.md's generated blocks and examples/libvirt-vm.xml")

// Where docs/vms.md puts things: QEMU's sockets in a directory QEMU may
// write, xvswitch's in its runtime directory; the test guest's boot files
// and serial ports in a scratch directory.
const (
	docQEMUSock = "/run/vhost-user/vm1.sock"
	docXvsSock  = "/run/xvswitch/vm2.sock"
	docMigSrc   = "/run/xvswitch/vm3.sock"     // TestLiveMigration's ports
	docMigDst   = "/run/xvswitch/vm3-new.sock" // (the guest moves to the second)
	docScratch  = "/tmp/xvs-vms/"
)

const (
	vmsDoc       = "../../docs/vms.md"
	vmsTmpfiles  = "../../examples/vhost-user.tmpfiles.conf"
	docBlockEnd  = "<!-- /generated -->"
	exampleIntro = "<!-- A libvirt domain (KVM) with two vhost-user NICs on xvswitch: docs/vms.md.\n" +
		"     Generated from the setup TestVMsLibvirt boots (cmd/xvswitch/vms_doc_test.go);\n" +
		"     it boots from a disk where the test boots a kernel, and is of type kvm. -->\n"
)

// vmsDocBlocks are docs/vms.md's generated blocks, by name: the QEMU
// command lines, xvswitch options and libvirt XML of the setups that
// TestVMsQEMU and TestVMsLibvirt run, with the document's paths.
func vmsDocBlocks() map[string]string {
	vm1, vm2 := qGuests(docQEMUSock, docXvsSock)
	boot := func(c qemu.GuestConfig) []string {
		return qemu.CommandLine(c, "vmlinux", "initrd.img", "console.log", "reports.log")
	}
	lvIfs := lvInterfaces(docQEMUSock, docXvsSock)
	var ifs strings.Builder
	for _, i := range lvIfs {
		ifs.WriteString(i.XML())
	}
	dom := lvDomain(docScratch+"vmlinux", docScratch+"initrd.img", qemu.KernelCmdline(lvGuest(docQEMUSock, docXvsSock)),
		[]string{docScratch + "console.log", docScratch + "reports.log"}, docQEMUSock, docXvsSock, false)
	dom.Name = "xvs-vm"
	migSrc, migDst := migGuest(docMigSrc, false), migGuest(docMigDst, false)
	migDst.Incoming = "unix:" + docScratch + "migrate.sock"
	return map[string]string{
		"xvswitch-migrate": shellLine(append([]string{"xvswitch", "run"}, migSwitchArgs("eth1", docMigSrc, docMigDst)...)),
		"qemu-migrate-src": shellLine(append(append([]string{"qemu-system-x86_64"}, boot(migSrc)...),
			qemu.MonitorArgs(migSrc, docScratch+"qmp-src.sock")...)),
		"qemu-migrate-dst": shellLine(append(append([]string{"qemu-system-x86_64"}, boot(migDst)...),
			qemu.MonitorArgs(migDst, docScratch+"qmp-dst.sock")...)),
		"xvswitch-qemu":     shellLine(append([]string{"xvswitch", "run"}, qSwitchPorts(docQEMUSock, docXvsSock)...)),
		"qemu-vm1":          shellLine(append([]string{"qemu-system-x86_64"}, boot(vm1)...)),
		"qemu-vm2":          shellLine(append([]string{"qemu-system-x86_64"}, boot(vm2)...)),
		"xvswitch-libvirt":  shellLine(append([]string{"xvswitch", "run", "--nic", "eth1"}, lvSwitchPorts(docQEMUSock, docXvsSock)...)),
		"libvirt-interface": ifs.String(),
		"libvirt-memory":    libvirt.MemoryBackingXML(false),
		"libvirt-hugepages": libvirt.MemoryBackingXML(true),
		"libvirt-domain":    dom.XML(),
	}
}

// vmsExampleXML is examples/libvirt-vm.xml: the tested domain's
// interfaces and memory on a KVM host, booting from a disk.
func vmsExampleXML() string {
	d := &libvirt.Domain{Name: "vm1", Type: "kvm", MemoryMiB: 2048, VCPUs: 2, Disk: "/var/lib/libvirt/images/vm1.qcow2",
		Interfaces: lvInterfaces(docQEMUSock, docXvsSock)}
	for i := range d.Interfaces {
		d.Interfaces[i].Alias = ""
	}
	return exampleIntro + d.XML()
}

// shellLine writes a command for a shell as the test runs it, quoted
// where the shell needs it, broken into lines before the options that
// start a part of it (memory, boot, serial ports, each NIC's pieces).
func shellLine(args []string) string {
	var b strings.Builder
	b.WriteString(shq(args[0]))
	prev := ""
	for _, a := range args[1:] {
		if breakBefore[a] && (a != "-serial" || prev != "-serial") {
			b.WriteString(" \\\n   ")
		}
		if strings.HasPrefix(a, "-") {
			prev = a
		}
		b.WriteString(" " + shq(a))
	}
	return b.String() + "\n"
}

var breakBefore = map[string]bool{"-object": true, "-kernel": true, "-append": true, "-serial": true,
	"-chardev": true, "-netdev": true, "-device": true, "--vhost": true, "-qmp": true, "-incoming": true}

var shellSafe = regexp.MustCompile(`^[A-Za-z0-9_@%+=:,./-]+$`)

func shq(s string) string {
	if shellSafe.MatchString(s) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

var docBlockStart = regexp.MustCompile("(?m)^<!-- generated: ([a-z0-9-]+) .*-->\n")

// fillDocBlocks puts each block's text into doc between its start marker
// and the end marker, fenced as shell or XML.
func fillDocBlocks(doc string, blocks map[string]string) (string, error) {
	var out strings.Builder
	seen := map[string]bool{}
	for {
		loc := docBlockStart.FindStringSubmatchIndex(doc)
		if loc == nil {
			break
		}
		name := doc[loc[2]:loc[3]]
		text, ok := blocks[name]
		if !ok {
			return "", fmt.Errorf("docs/vms.md has a generated block %q that vmsDocBlocks does not know", name)
		}
		end := strings.Index(doc[loc[1]:], docBlockEnd)
		if end < 0 {
			return "", fmt.Errorf("docs/vms.md: block %q has no %s", name, docBlockEnd)
		}
		lang := "sh"
		if strings.HasPrefix(text, "<") {
			lang = "xml"
		}
		out.WriteString(doc[:loc[1]] + "```" + lang + "\n" + text + "```\n")
		doc = doc[loc[1]+end:]
		seen[name] = true
	}
	out.WriteString(doc)
	var missing []string
	for name := range blocks {
		if !seen[name] {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		return "", fmt.Errorf("docs/vms.md lacks the generated blocks %v", missing)
	}
	return out.String(), nil
}

// TestVMsDoc: docs/vms.md's command lines and XML, and
// examples/libvirt-vm.xml, are what the VM tests run (with the
// document's paths). -update-docs rewrites them.
func TestVMsDoc(t *testing.T) {
	b, err := os.ReadFile(vmsDoc)
	if err != nil {
		t.Fatal(err)
	}
	want, err := fillDocBlocks(string(b), vmsDocBlocks())
	if err != nil {
		t.Fatal(err)
	}
	ex, _ := os.ReadFile(vmsExample)
	if *updateDocs {
		if err := os.WriteFile(vmsDoc, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(vmsExample, []byte(vmsExampleXML()), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if want != string(b) {
		t.Errorf("docs/vms.md's generated blocks differ from what the VM tests run (go test ./cmd/xvswitch -run TestVMsDoc -update-docs rewrites them); want:\n%s", want)
	}
	if string(ex) != vmsExampleXML() {
		t.Errorf("examples/libvirt-vm.xml differs from the tested setup (-update-docs rewrites it); want:\n%s", vmsExampleXML())
	}
	// The tmpfiles.d example makes the directory TestVMsLibvirt makes.
	tf, err := os.ReadFile(vmsTmpfiles)
	if err != nil {
		t.Fatal(err)
	}
	line := fmt.Sprintf("d %s %04o root kvm -\n", filepath.Dir(docQEMUSock), qemuSockDirMode)
	if !strings.HasSuffix(string(tf), "\n"+line) {
		t.Errorf("%s should end with %q, the directory the libvirt test makes", vmsTmpfiles, line)
	}
}
