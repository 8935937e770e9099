package vswitch

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"unsafe"

	"golang.org/x/sys/unix"
)

// An ethtool ntuple rule that receives a destination MAC on one rx queue:
// how a real NIC puts an owned queue's VM's frames on that queue (what
// `ethtool -N IFNAME flow-type ether dst MAC action Q` does), through
// SIOCETHTOOL with ETHTOOL_SRXCLSRLINS and ETHTOOL_SRXCLSRLDEL.
//
// unsafe: the ioctl takes a pointer to struct ethtool_rxnfc in the ifreq;
// the struct is a Go byte array laid out as the kernel's (offsets below,
// include/uapi/linux/ethtool.h on x86-64 and arm64), kept alive across
// the call, and the kernel reads and writes only its 192 bytes.

// ErrNoNtuple: the interface takes no ntuple rules (veth, or a NIC with
// ntuple filters off or unsupported).
var ErrNoNtuple = errors.New("vswitch: the interface takes no ethtool ntuple rules")

// Offsets in struct ethtool_rxnfc; fs is its struct ethtool_rx_flow_spec
// at 16 (h_u at fs+4 starts with the ether spec's h_dest, m_u at fs+76 its
// mask; ring_cookie at fs+152, location at fs+160).
const (
	rxnfcSize       = 192
	rxnfcCmd        = 0
	rxnfcFlowType   = 4
	rxnfcFS         = 16
	fsFlowType      = rxnfcFS + 0
	fsHDest         = rxnfcFS + 4
	fsMDest         = rxnfcFS + 76
	fsRingCookie    = rxnfcFS + 152
	fsLocation      = rxnfcFS + 160
	rxClsLocAny     = 0xffffffff // RX_CLS_LOC_ANY: the driver picks the slot
	etherFlow       = unix.ETHER_FLOW
	ethtoolIfreqLen = 40
)

// ethtoolRxnfc issues one SIOCETHTOOL with rxnfc on ifname.
func ethtoolRxnfc(ifname string, rxnfc *[rxnfcSize]byte) error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	var ifr struct {
		name [unix.IFNAMSIZ]byte
		data unsafe.Pointer
		_    [ethtoolIfreqLen - unix.IFNAMSIZ - 8]byte
	}
	copy(ifr.name[:unix.IFNAMSIZ-1], ifname)
	ifr.data = unsafe.Pointer(rxnfc)
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SIOCETHTOOL, uintptr(unsafe.Pointer(&ifr)))
	if errno != 0 {
		return errno
	}
	return nil
}

// addMACRule installs a rule receiving frames to mac on queue of ifname
// and returns its location, for delMACRule.
func addMACRule(ifname string, mac net.HardwareAddr, queue int) (uint32, error) {
	var r [rxnfcSize]byte
	le := binary.LittleEndian // host order; both supported arches are little-endian
	le.PutUint32(r[rxnfcCmd:], unix.ETHTOOL_SRXCLSRLINS)
	le.PutUint32(r[rxnfcFlowType:], etherFlow)
	le.PutUint32(r[fsFlowType:], etherFlow)
	copy(r[fsHDest:fsHDest+6], mac)
	copy(r[fsMDest:fsMDest+6], []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}) // match every bit of the MAC
	le.PutUint64(r[fsRingCookie:], uint64(queue))
	le.PutUint32(r[fsLocation:], rxClsLocAny)
	if err := ethtoolRxnfc(ifname, &r); err != nil {
		if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EINVAL) {
			return 0, fmt.Errorf("%w: %s: ETHTOOL_SRXCLSRLINS dst %s action %d: %v (veth has none: steer with a tc program on the sender, docs/zerocopy.md; or install the rule yourself)",
				ErrNoNtuple, ifname, mac, queue, err)
		}
		return 0, fmt.Errorf("vswitch: %s: ethtool ntuple rule dst %s action %d: %w", ifname, mac, queue, err)
	}
	return le.Uint32(r[fsLocation:]), nil
}

// delMACRule removes the rule addMACRule installed at loc.
func delMACRule(ifname string, loc uint32) error {
	var r [rxnfcSize]byte
	le := binary.LittleEndian
	le.PutUint32(r[rxnfcCmd:], unix.ETHTOOL_SRXCLSRLDEL)
	le.PutUint32(r[fsLocation:], loc)
	if err := ethtoolRxnfc(ifname, &r); err != nil {
		return fmt.Errorf("vswitch: %s: removing ethtool ntuple rule %d: %w", ifname, loc, err)
	}
	return nil
}
