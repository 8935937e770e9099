package main

import (
	"encoding/binary"
	"fmt"
	"net"
	"strings"

	"github.com/xvswitch/xvswitch/ctl"
)

// frameLine is what `xvswitch capture` prints for a frame without -w, in
// the manner of tcpdump -e: the time, the direction, the MACs, then what
// the frame carries as far as VLAN tags, ARP, IP and the transport's ports
// or ICMP type:
//
//	12:00:01.000001 in  52:54:00:00:00:01 > 52:54:00:00:00:02, IPv4 10.0.0.1 > 10.0.0.2: ICMP echo request, id 7, seq 1, length 98
func frameLine(f ctl.CaptureFrame) string {
	dir := "in "
	if f.Out {
		dir = "out"
	}
	return fmt.Sprintf("%s %s %s, length %d", f.Time.Format("15:04:05.000000"), dir, describeFrame(f.Data), f.WireLen)
}

var be = binary.BigEndian

func describeFrame(b []byte) string {
	if len(b) < 14 {
		return fmt.Sprintf("%d bytes, too short for Ethernet", len(b))
	}
	var s strings.Builder
	fmt.Fprintf(&s, "%s > %s", net.HardwareAddr(b[6:12]), net.HardwareAddr(b[0:6]))
	typ, p := be.Uint16(b[12:]), b[14:]
	for (typ == 0x8100 || typ == 0x88a8) && len(p) >= 4 {
		fmt.Fprintf(&s, ", vlan %d", be.Uint16(p)&0xfff)
		typ, p = be.Uint16(p[2:]), p[4:]
	}
	s.WriteString(", ")
	switch typ {
	case 0x0800:
		s.WriteString(describeIPv4(p))
	case 0x86dd:
		s.WriteString(describeIPv6(p))
	case 0x0806:
		s.WriteString(describeARP(p))
	default:
		fmt.Fprintf(&s, "ethertype %#04x", typ)
	}
	return s.String()
}

// describeARP reads ARP for IPv4 over Ethernet.
func describeARP(p []byte) string {
	if len(p) < 28 || p[4] != 6 || p[5] != 4 {
		return "ARP"
	}
	sha, spa, tpa := net.HardwareAddr(p[8:14]), net.IP(p[14:18]), net.IP(p[24:28])
	switch op := be.Uint16(p[6:]); op {
	case 1:
		return fmt.Sprintf("ARP, Request who-has %s tell %s", tpa, spa)
	case 2:
		return fmt.Sprintf("ARP, Reply %s is-at %s", spa, sha)
	default:
		return fmt.Sprintf("ARP, operation %d", op)
	}
}

func describeIPv4(p []byte) string {
	if len(p) < 20 || p[0]>>4 != 4 || int(p[0]&0xf)*4 < 20 || len(p) < int(p[0]&0xf)*4 {
		return "IPv4, truncated"
	}
	head := fmt.Sprintf("IPv4 %s > %s: ", net.IP(p[12:16]), net.IP(p[16:20]))
	if be.Uint16(p[6:])&0x1fff != 0 {
		return head + "a fragment"
	}
	return head + describeTransport(p[9], p[int(p[0]&0xf)*4:])
}

// describeIPv6 names the first header after the fixed one (extension
// headers are not followed).
func describeIPv6(p []byte) string {
	if len(p) < 40 || p[0]>>4 != 6 {
		return "IPv6, truncated"
	}
	return fmt.Sprintf("IPv6 %s > %s: ", net.IP(p[8:24]), net.IP(p[24:40])) + describeTransport(p[6], p[40:])
}

// icmpNames are the ICMP and ICMPv6 types worth a name here.
var icmpNames = map[[2]byte]string{
	{1, 0}: "echo reply", {1, 8}: "echo request", {1, 3}: "unreachable", {1, 11}: "time exceeded",
	{58, 128}: "echo request", {58, 129}: "echo reply", {58, 1}: "unreachable",
	{58, 133}: "router solicitation", {58, 134}: "router advertisement",
	{58, 135}: "neighbor solicitation", {58, 136}: "neighbor advertisement",
	{58, 143}: "multicast listener report v2",
}

// describeTransport reads what an IP packet of protocol proto carries.
func describeTransport(proto byte, p []byte) string {
	switch {
	case proto == 6 && len(p) >= 14:
		return fmt.Sprintf("TCP %d > %d [%s]", be.Uint16(p), be.Uint16(p[2:]), tcpFlags(p[13]))
	case proto == 17 && len(p) >= 8:
		return fmt.Sprintf("UDP %d > %d, %d bytes", be.Uint16(p), be.Uint16(p[2:]), int(be.Uint16(p[4:]))-8)
	case (proto == 1 || proto == 58) && len(p) >= 8:
		kind := "ICMP"
		if proto == 58 {
			kind = "ICMPv6"
		}
		name, ok := icmpNames[[2]byte{proto, p[0]}]
		if !ok {
			return fmt.Sprintf("%s type %d, code %d", kind, p[0], p[1])
		}
		if strings.HasPrefix(name, "echo") {
			return fmt.Sprintf("%s %s, id %d, seq %d", kind, name, be.Uint16(p[4:]), be.Uint16(p[6:]))
		}
		return kind + " " + name
	}
	return fmt.Sprintf("protocol %d", proto)
}

// tcpFlags writes a TCP header's flags as tcpdump does: S, F, R, P, and
// "." for ACK.
func tcpFlags(f byte) string {
	var s []byte
	for _, x := range []struct {
		bit byte
		c   byte
	}{{0x02, 'S'}, {0x01, 'F'}, {0x04, 'R'}, {0x08, 'P'}, {0x10, '.'}} {
		if f&x.bit != 0 {
			s = append(s, x.c)
		}
	}
	return string(s)
}
