package vhost

import (
	"encoding/binary"
	"net"
)

// RARPFrameLen is the length of the frame RARPFrame builds: a 28-byte RARP
// payload after the Ethernet header, padded to the 60-byte minimum.
const RARPFrameLen = 60

// RARPFrame builds the broadcast RARP request ("reverse request", opcode 3)
// that announces mac after a live migration, as QEMU's qemu_announce_self
// and DPDK's vhost do: sender and target hardware address mac, protocol
// addresses zero. Switches on the path learn the guest's new location.
func RARPFrame(mac net.HardwareAddr) [RARPFrameLen]byte {
	var f [RARPFrameLen]byte
	for i := 0; i < 6; i++ {
		f[i] = 0xff
	}
	copy(f[6:12], mac)
	binary.BigEndian.PutUint16(f[12:], 0x8035) // ETH_P_RARP
	p := f[14:]
	binary.BigEndian.PutUint16(p[0:], 1)      // hardware type: Ethernet
	binary.BigEndian.PutUint16(p[2:], 0x0800) // protocol type: IPv4
	p[4], p[5] = 6, 4                         // address lengths
	binary.BigEndian.PutUint16(p[6:], 3)      // RARP request
	copy(p[8:14], mac)                        // sender hardware address
	copy(p[18:24], mac)                       // target hardware address
	return f
}
