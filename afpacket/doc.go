// Package afpacket receives an interface's broadcast and multicast frames
// from the kernel, for a switch that leaves them to the host (the XDP
// program passes them) and still owes its VMs a copy.
//
// A Socket is an AF_PACKET socket bound to one interface with a
// memory-mapped TPACKET_V2 receive ring: a classic BPF filter accepts only
// group destinations (the I/G bit of the first byte), PACKET_IGNORE_OUTGOING
// keeps the host's own transmissions out (the kernel already drops its
// multicast loopback copies), and frames are read from the ring in bursts
// with no syscall and no allocation; the fd polls readable when frames
// wait. A VLAN tag the kernel took off into the ring's header
// (tp_vlan_tci) is put back into the frame, so it reads as on the wire.
// Frames the kernel could not place because the ring was full are in
// Stats.Drops.
package afpacket
