package testpmd

import (
	"encoding/binary"
	"fmt"
	"net"
)

// What testpmd's txonly mode (and "start tx_first N") sends, as DPDK 22.11
// builds it (checked byte for byte against a pcap of its output by
// TestTestpmdTxonlyFrameBytes). For a frame size L (--txpkts, default 64;
// L counts from the Ethernet header to the end of the payload, no FCS):
//
//	offset  bytes  value
//	0       6      destination: the port's --eth-peer, by default
//	               02:00:00:00:00:<port ID> (DefaultPeer)
//	6       6      source: the sending port's MAC (Process.MAC(port);
//	               vhost ports are 56:48:4f:53:54:<n>, "VHOST"+n;
//	               virtio-user is random unless Port.MAC is set)
//	12      2      0x0800 (IPv4)
//	14      20     IPv4: 45 00, total length L-14, ID 0, flags/fragment 0,
//	               TTL 64, protocol 17 (UDP), header checksum,
//	               source 198.18.0.1, destination 198.18.0.2
//	34      8      UDP: ports 9 -> 9, length L-34, checksum 0
//	42      L-42   payload: testpmd never writes it; in a fresh mbuf pool
//	               (all of ours) it is zeros, but don't rely on it
//
// Every frame of a run is identical (no sequence number; --txonly-multi-flow
// would vary the source IP).
//
// On a vhost-user ring the frame follows a 12-byte virtio-net header
// (virtio-user always negotiates VERSION_1). From a virtio-user sender it
// is all zeros (testpmd asks for no offloads). A vhost sender writes zeros
// too, except num_buffers (bytes 10-11, little-endian), which it sets to
// the number of buffers the frame took (1 for a 64-byte frame). Don't assume a descriptor layout: virtio-user
// puts header and frame in one descriptor when it can push the header into
// the mbuf's headroom, and in separate ones otherwise.

// DefaultPeer is the destination MAC testpmd's txonly and mac modes
// write for a port without --eth-peer.
func DefaultPeer(port int) net.HardwareAddr {
	return net.HardwareAddr{0x02, 0, 0, 0, 0, byte(port)}
}

// Txonly frame constants (DPDK 22.11 app/test-pmd/txonly.c).
var (
	TxonlySrcIP = net.IPv4(198, 18, 0, 1).To4()
	TxonlyDstIP = net.IPv4(198, 18, 0, 2).To4()
)

const (
	TxonlyUDPPort  = 9
	TxonlyMinFrame = 14 + 20 + 8
)

// TxonlyFrame returns the frame testpmd's txonly mode sends from a port
// with MAC src to dst, size bytes long (payload zeros, see above).
func TxonlyFrame(dst, src net.HardwareAddr, size int) ([]byte, error) {
	if size < TxonlyMinFrame {
		return nil, fmt.Errorf("%w: txonly frame of %d bytes (minimum %d)", ErrHarness, size, TxonlyMinFrame)
	}
	if len(dst) != 6 || len(src) != 6 {
		return nil, fmt.Errorf("%w: txonly frame needs 6-byte MACs", ErrHarness)
	}
	f := make([]byte, size)
	copy(f[0:6], dst)
	copy(f[6:12], src)
	binary.BigEndian.PutUint16(f[12:], 0x0800)
	ip := f[14:34]
	ip[0] = 0x45
	binary.BigEndian.PutUint16(ip[2:], uint16(size-14))
	ip[8] = 64 // TTL
	ip[9] = 17 // UDP
	copy(ip[12:16], TxonlySrcIP)
	copy(ip[16:20], TxonlyDstIP)
	binary.BigEndian.PutUint16(ip[10:], ipv4Checksum(ip))
	udp := f[34:42]
	binary.BigEndian.PutUint16(udp[0:], TxonlyUDPPort)
	binary.BigEndian.PutUint16(udp[2:], TxonlyUDPPort)
	binary.BigEndian.PutUint16(udp[4:], uint16(size-34))
	return f, nil
}

// ipv4Checksum is the Internet checksum of an IPv4 header whose checksum
// field is zero.
func ipv4Checksum(h []byte) uint16 {
	var sum uint32
	for i := 0; i+1 < len(h); i += 2 {
		sum += uint32(binary.BigEndian.Uint16(h[i:]))
	}
	for sum > 0xffff {
		sum = sum>>16 + sum&0xffff
	}
	return ^uint16(sum)
}
