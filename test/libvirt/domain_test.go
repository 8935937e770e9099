package libvirt

import (
	"encoding/xml"
	"strings"
	"testing"
)

// TestDomainXML: the XML is well formed, says what the fields asked for,
// escapes what it must, and overrides vectors only for TCG.
func TestDomainXML(t *testing.T) {
	d := &Domain{Name: "vm", Type: "qemu", MemoryMiB: 256, VCPUs: 2, HugePages: true,
		Kernel: "/k", Initrd: "/i", Cmdline: "console=ttyS0 a<b&c", Serials: []string{"/c.log", "/r'.log"},
		Interfaces: []Interface{
			{MAC: "52:54:00:00:00:01", Socket: "/run/vhost-user/vm1.sock", Mode: "server", Queues: 2, Packed: true, Alias: "ua-a"},
			{MAC: "52:54:00:00:00:02", Socket: "/run/xvswitch/vm2.sock", Mode: "client", Reconnect: 1, Alias: "ua-b"},
		}}
	var parsed struct {
		Type    string    `xml:"type,attr"`
		Cmdline string    `xml:"os>cmdline"`
		Huge    *struct{} `xml:"memoryBacking>hugepages"`
		Source  struct {
			Type string `xml:"type,attr"`
		} `xml:"memoryBacking>source"`
		Access struct {
			Mode string `xml:"mode,attr"`
		} `xml:"memoryBacking>access"`
		Ifaces []struct {
			Type   string `xml:"type,attr"`
			Source struct {
				Path      string `xml:"path,attr"`
				Mode      string `xml:"mode,attr"`
				Reconnect *struct {
					Timeout string `xml:"timeout,attr"`
				} `xml:"reconnect"`
			} `xml:"source"`
			Driver struct {
				Queues string `xml:"queues,attr"`
				Packed string `xml:"packed,attr"`
			} `xml:"driver"`
		} `xml:"devices>interface"`
		Serials []struct {
			Path string `xml:"path,attr"`
		} `xml:"devices>serial>source"`
		Override []struct {
			Alias string `xml:"alias,attr"`
		} `xml:"override>device"`
	}
	x := d.XML()
	if err := xml.Unmarshal([]byte(x), &parsed); err != nil {
		t.Fatalf("%v\n%s", err, x)
	}
	i := parsed.Ifaces
	if parsed.Type != "qemu" || parsed.Cmdline != d.Cmdline || parsed.Huge == nil ||
		parsed.Source.Type != "memfd" || parsed.Access.Mode != "shared" || len(i) != 2 ||
		i[0].Type != "vhostuser" || i[0].Source.Mode != "server" || i[0].Driver.Queues != "2" || i[0].Driver.Packed != "on" ||
		i[0].Source.Reconnect != nil || i[1].Source.Mode != "client" || i[1].Source.Reconnect == nil ||
		i[1].Source.Reconnect.Timeout != "1" || len(parsed.Serials) != 2 || parsed.Serials[1].Path != "/r'.log" ||
		len(parsed.Override) != 2 || parsed.Override[1].Alias != "ua-b" {
		t.Fatalf("parsed %+v from\n%s", parsed, x)
	}
	d.Type = "kvm"
	if x := d.XML(); strings.Contains(x, "qemu:") {
		t.Errorf("a KVM domain needs no override:\n%s", x)
	}
}
