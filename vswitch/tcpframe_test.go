package vswitch

import (
	"encoding/binary"
	"testing"

	"github.com/xvswitch/xvswitch/virtionet"
)

// Guests' offload features as a Linux guest negotiates them.
const (
	featTxOffloads = 1<<virtionet.FeatureCsum | 1<<virtionet.FeatureHostTSO4 | 1<<virtionet.FeatureHostTSO6
	featRxOffloads = 1<<virtionet.FeatureGuestCsum | 1<<virtionet.FeatureGuestTSO4 | 1<<virtionet.FeatureGuestTSO6
)

// tsoFrame is a TCP/IPv4 frame from src to dst with payload, its TCP
// checksum field holding the pseudo-header's sum, and the header a guest
// sends it with for TSO at mss (gso 0: only NEEDS_CSUM).
func tsoFrame(dst, src uint64, payload []byte, mss uint16) ([]byte, virtionet.Header) {
	f := ethFrame(dst, src, "")
	f[12], f[13] = 0x08, 0x00
	ip := make([]byte, 20)
	ip[0], ip[6], ip[8], ip[9] = 0x45, 0x40, 64, 6
	binary.BigEndian.PutUint16(ip[2:], uint16(min(20+20+len(payload), 0xffff)))
	binary.BigEndian.PutUint16(ip[4:], 7)
	copy(ip[12:], []byte{10, 0, 0, 1, 10, 0, 0, 2})
	binary.BigEndian.PutUint16(ip[10:], ^fold16(sum16(ip)))
	tcp := make([]byte, 20)
	binary.BigEndian.PutUint16(tcp[0:], 33000)
	binary.BigEndian.PutUint16(tcp[2:], 5001)
	binary.BigEndian.PutUint32(tcp[4:], 1000)
	tcp[12], tcp[13] = 5<<4, 0x18 // ACK PSH
	binary.BigEndian.PutUint16(tcp[16:], fold16(sum16(ip[12:20])+6+uint64(20+len(payload))))
	f = append(append(append(f, ip...), tcp...), payload...)
	h := virtionet.Header{Flags: virtionet.FlagNeedsCsum, HdrLen: 54, CsumStart: 34, CsumOffset: 16}
	if mss != 0 {
		h.GSOType, h.GSOSize = virtionet.GSOTCPv4, mss
	}
	return f, h
}

func sum16(b []byte) uint64 {
	var s uint64
	for i := 0; i+1 < len(b); i += 2 {
		s += uint64(b[i])<<8 | uint64(b[i+1])
	}
	if len(b)%2 == 1 {
		s += uint64(b[len(b)-1]) << 8
	}
	return s
}

func fold16(s uint64) uint16 {
	for s > 0xffff {
		s = s&0xffff + s>>16
	}
	return uint16(s)
}

// checkTCPv4 verifies a received TCP/IPv4 frame as its receiver would, by
// recomputing both checksums, and returns its sequence number, flags and
// payload.
func checkTCPv4(t *testing.T, f []byte) (uint32, uint8, []byte) {
	t.Helper()
	ip, tcp := f[14:34], f[34:]
	if fold16(sum16(ip)) != 0xffff || int(binary.BigEndian.Uint16(ip[2:])) != len(f)-14 {
		t.Fatalf("IPv4 header checksum or length wrong (%d bytes)", len(f))
	}
	if fold16(sum16(ip[12:20])+6+uint64(len(tcp))+sum16(tcp)) != 0xffff {
		t.Fatal("TCP checksum wrong")
	}
	return binary.BigEndian.Uint32(tcp[4:]), tcp[13], tcp[20:]
}
