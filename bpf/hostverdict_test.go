package bpf

import (
	"encoding/binary"
	"net"
	"testing"

	"github.com/cilium/ebpf"
)

const (
	hostIP4  = "10.0.0.1"
	hostIP6  = "fd00::1"
	vmIP4    = "10.0.0.9"
	vmIP6    = "fd00::9"
	peerMAC  = "02:00:00:00:00:aa"
	snmHost6 = "33:33:ff:00:00:01" // solicited-node multicast of fd00::1
)

// ethFrame starts a frame to dst with ethertype proto, behind an 802.1Q
// tag (VLAN 100) if vlan is set.
func ethFrame(dst string, vlan bool, proto uint16) []byte {
	f := append([]byte{}, mustMAC(dst)...)
	f = append(f, mustMAC(peerMAC)...)
	if vlan {
		f = binary.BigEndian.AppendUint16(f, 0x8100)
		f = binary.BigEndian.AppendUint16(f, 100)
	}
	return binary.BigEndian.AppendUint16(f, proto)
}

// retag replaces the ethertype of a frame's tag.
func retag(f []byte, tpid uint16) []byte {
	binary.BigEndian.PutUint16(f[12:], tpid)
	return f
}

// pad60 pads a frame to the Ethernet minimum, as a NIC delivers it.
func pad60(f []byte) []byte {
	for len(f) < 60 {
		f = append(f, 0)
	}
	return f
}

// arpFrame is an ARP packet (RFC 826, IPv4 over Ethernet) with opcode op
// from sip to tip, in a frame to dst.
func arpFrame(dst string, vlan bool, op uint16, sip, tip string) []byte {
	f := ethFrame(dst, vlan, 0x0806)
	f = binary.BigEndian.AppendUint16(f, 1)      // hardware: Ethernet
	f = binary.BigEndian.AppendUint16(f, 0x0800) // protocol: IPv4
	f = append(f, 6, 4)
	f = binary.BigEndian.AppendUint16(f, op)
	f = append(f, mustMAC(peerMAC)...)
	f = append(f, net.ParseIP(sip).To4()...)
	f = append(f, make([]byte, 6)...)
	f = append(f, net.ParseIP(tip).To4()...)
	return pad60(f)
}

// icmp6Frame is an IPv6 packet from fd00::2 with ICMPv6 type typ for
// target right after the fixed header (or after nexthdr's header if it is
// not 58), in a frame to dst. The checksum is not computed: the program
// does not look at it.
func icmp6Frame(dst string, vlan bool, nexthdr, typ uint8, target string) []byte {
	f := ethFrame(dst, vlan, 0x86dd)
	f = append(f, 0x60, 0, 0, 0)
	f = binary.BigEndian.AppendUint16(f, 24)
	f = append(f, nexthdr, 255)
	f = append(f, net.ParseIP("fd00::2").To16()...)
	f = append(f, net.ParseIP("ff02::1:ff00:1").To16()...)
	f = append(f, typ, 0, 0, 0, 0, 0, 0, 0)
	return append(f, net.ParseIP(target).To16()...)
}

func nsFrame(dst string, vlan bool, target string) []byte {
	return icmp6Frame(dst, vlan, 58, 135, target)
}

// setHostAddrs fills the loaded program's host maps as SetHostAddrs does.
func setHostAddrs(tb testing.TB, o *steerObjects, addrs ...string) {
	tb.Helper()
	var ha []hostAddr
	for _, a := range addrs {
		ha = append(ha, hostAddr{ip: net.ParseIP(a), ifindex: 1})
	}
	v4, v6, err := hostKeys(ha)
	if err != nil {
		tb.Fatal(err)
	}
	if err := replaceSet(o.HostV4, v4); err != nil {
		tb.Fatal(err)
	}
	if err := replaceSet(o.HostV6, v6); err != nil {
		tb.Fatal(err)
	}
}

// Address resolution for the host's own addresses goes to the kernel even
// when the MAC policy steers broadcast and multicast; everything else about
// group frames is as before, and unicast frames are never looked into.
func TestProgramHostVerdicts(t *testing.T) {
	o := loaded(t)
	k, _ := macKey(mustMAC(vmMAC))
	if err := o.Macs.Update(&k, &steerXvsMacOwner{Port: 1}, ebpf.UpdateAny); err != nil {
		t.Fatal(err)
	}
	setHostAddrs(t, o, hostIP4, hostIP6, "fe80::1")
	type c = Counters
	bm := Policy{Mode: ModeMAC, Broadcast: true, Multicast: true}
	hostARP, hostND := c{HostARPPassed: 1}, c{HostNDPassed: 1}
	bcast, mcast := c{NoSocketPassed: 1, SteeredBroadcast: 1}, c{NoSocketPassed: 1, SteeredMulticast: 1}
	who := func(tip string) []byte { return arpFrame(bcastMAC, false, 1, "10.0.0.2", tip) }
	cases := []struct {
		name  string
		p     Policy
		frame []byte
		want  Counters
	}{
		{"arp request for host", bm, who(hostIP4), hostARP},
		{"arp request for a vm", bm, who(vmIP4), bcast},
		{"arp request for host, 802.1Q", bm, arpFrame(bcastMAC, true, 1, "10.0.0.2", hostIP4), hostARP},
		{"arp broadcast reply to host", bm, arpFrame(bcastMAC, false, 2, "10.0.0.2", hostIP4), hostARP},
		{"arp probe for host (sender 0.0.0.0)", bm, arpFrame(bcastMAC, false, 1, "0.0.0.0", hostIP4), hostARP},
		{"gratuitous arp of a peer", bm, arpFrame(bcastMAC, false, 1, "10.0.0.2", "10.0.0.2"), bcast},
		{"gratuitous arp reply of a peer", bm, arpFrame(bcastMAC, false, 2, "10.0.0.2", "10.0.0.2"), bcast},
		{"arp for host to a multicast mac", bm, arpFrame(mcastMAC, false, 1, "10.0.0.2", hostIP4), hostARP},
		{"arp for host, truncated", bm, who(hostIP4)[:14+27], bcast},
		{"arp for host, 802.1Q, truncated", bm, arpFrame(bcastMAC, true, 1, "10.0.0.2", hostIP4)[:18+27], bcast},
		{"arp for host, plen 16", bm, func() []byte { f := who(hostIP4); f[14+5] = 16; return f }(), bcast},
		{"arp for host, protocol not IPv4", bm, func() []byte { f := who(hostIP4); f[14+2] = 0x86; f[14+3] = 0xdd; return f }(), bcast},
		{"arp for host, 802.1ad tag", bm, retag(arpFrame(bcastMAC, true, 1, "10.0.0.2", hostIP4), 0x88a8), bcast},
		{"ns for host", bm, nsFrame(snmHost6, false, hostIP6), hostND},
		{"ns for host link-local", bm, nsFrame("33:33:ff:00:00:01", false, "fe80::1"), hostND},
		{"ns for a vm", bm, nsFrame("33:33:ff:00:00:09", false, vmIP6), mcast},
		{"ns for host, 802.1Q", bm, nsFrame(snmHost6, true, hostIP6), hostND},
		{"ns for host, broadcast mac", bm, nsFrame(bcastMAC, false, hostIP6), hostND},
		{"ns for host, truncated", bm, nsFrame(snmHost6, false, hostIP6)[:14+40+23], mcast},
		{"ns for host behind a hop-by-hop header", bm, icmp6Frame(snmHost6, false, 0, 135, hostIP6), mcast},
		{"na for host", bm, icmp6Frame("33:33:00:00:00:01", false, 58, 136, hostIP6), mcast},
		{"ns for host, code 1", bm, func() []byte { f := nsFrame(snmHost6, false, hostIP6); f[14+41] = 1; return f }(), mcast},
		{"ipv4 broadcast to host's address", bm, frameTo(bcastMAC), bcast},
		{"only an ethernet header", bm, frameTo(bcastMAC)[:14], bcast},
		// The policy decides first: what it does not steer is not_owned.
		{"arp for host, broadcast off", Policy{Mode: ModeMAC, Multicast: true}, who(hostIP4), c{GroupPassed: 1}},
		{"ns for host, multicast off", Policy{Mode: ModeMAC, Broadcast: true}, nsFrame(snmHost6, false, hostIP6), c{GroupPassed: 1}},
		{"arp for host, mode none", Policy{Mode: ModeNone}, who(hostIP4), c{NotOwnedPassed: 1}},
		// Mode all: the NIC is the switch's, the host's ARP included.
		{"arp for host, mode all", Policy{Mode: ModeAll}, who(hostIP4), bcast},
		{"ns for host, mode all", Policy{Mode: ModeAll}, nsFrame(snmHost6, false, hostIP6), mcast},
		// Unicast is never looked into: a VM's frame stays the VM's.
		{"arp for host to a vm mac", bm, arpFrame(vmMAC, false, 1, "10.0.0.2", hostIP4), c{NoSocketPassed: 1}},
		{"arp for host to the host's mac", bm, arpFrame(otherMAC, false, 1, "10.0.0.2", hostIP4), c{NotOwnedPassed: 1}},
	}
	for _, tc := range cases {
		setCfg(t, o, tc.p)
		before := readCounters(t, o)
		ret, err := o.XvsSteer.Run(&ebpf.RunOptions{Data: tc.frame})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if ret != 2 { // XDP_PASS: a steered frame with no socket too
			t.Errorf("%s: verdict %d, want XDP_PASS", tc.name, ret)
		}
		if d := readCounters(t, o).Sub(before); d != tc.want {
			t.Errorf("%s (%v): counted %+v, want %+v", tc.name, tc.p, d, tc.want)
		}
	}

	// Removed addresses are the switch's again.
	setHostAddrs(t, o, vmIP4)
	setCfg(t, o, bm)
	for _, tc := range []struct {
		frame []byte
		want  Counters
	}{{who(hostIP4), bcast}, {nsFrame(snmHost6, false, hostIP6), mcast}, {who(vmIP4), hostARP}} {
		before := readCounters(t, o)
		if _, err := o.XvsSteer.Run(&ebpf.RunOptions{Data: tc.frame}); err != nil {
			t.Fatal(err)
		}
		if d := readCounters(t, o).Sub(before); d != tc.want {
			t.Errorf("after replacing the set: counted %+v, want %+v", d, tc.want)
		}
	}
}
