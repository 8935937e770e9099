package portspec

import "fmt"

// NICMode is how AF_XDP sockets bind to a NIC queue.
type NICMode string

const (
	ModeAuto     NICMode = "auto" // try zero-copy, fall back to copy
	ModeCopy     NICMode = "copy"
	ModeZeroCopy NICMode = "zerocopy"
)

// NICCsum is whether the port completes the TCP and UDP checksums of the
// frames it receives (docs/afxdp-veth.md): a sender with TX checksum
// offload leaves them partial, and AF_XDP cannot tell.
type NICCsum string

const (
	CsumAuto NICCsum = "" // fix on a veth, off on any other NIC
	CsumFix  NICCsum = "fix"
	CsumOff  NICCsum = "off"
)

// NIC is an AF_XDP port: `IFNAME[,queues=N][,mode=auto|copy|zerocopy][,csum=auto|fix|off][,maxmacs=N][,vlan=N][,trunk=N+M+...][,name=NAME]`.
type NIC struct {
	Name   string  `json:"name"`
	Ifname string  `json:"ifname"`
	Queues int     `json:"queues,omitempty"` // 0: all of the NIC's queues
	Mode   NICMode `json:"mode"`
	// MaxMACs (maxmacs=N) is how many learned MACs the port may hold in
	// the FDB at once; 0 means the switch's default for a NIC port.
	MaxMACs int `json:"maxmacs,omitempty"`
	// Csum (csum=auto|fix|off) is whether received TCP and UDP get their
	// checksums completed; auto (empty) fixes them on a veth only.
	Csum NICCsum `json:"csum,omitempty"`
	// VLANs (vlan=N, trunk=N+M+...) are the port's 802.1Q settings: a
	// trunk's VLANs are tagged on the wire, vlan=N is untagged there.
	VLANs
}

// ParseNIC parses a --nic value.
func ParseNIC(s string) (NIC, error) {
	head, opts, err := split(s)
	if err != nil {
		return NIC{}, err
	}
	n := NIC{Ifname: head, Name: head, Mode: ModeAuto}
	for k, v := range opts {
		switch k {
		case "queues":
			if n.Queues, err = positive(v, k); err != nil {
				return NIC{}, err
			}
		case "mode":
			switch m := NICMode(v); m {
			case ModeAuto, ModeCopy, ModeZeroCopy:
				n.Mode = m
			default:
				return NIC{}, fmt.Errorf("%w: mode=%q: want auto, copy or zerocopy", ErrBadSpec, v)
			}
		case "csum":
			switch c := NICCsum(v); c {
			case "auto":
				n.Csum = CsumAuto
			case CsumFix, CsumOff:
				n.Csum = c
			default:
				return NIC{}, fmt.Errorf("%w: csum=%q: want auto, fix or off", ErrBadSpec, v)
			}
		case "maxmacs":
			if n.MaxMACs, err = maxMACs(v); err != nil {
				return NIC{}, err
			}
		case "name":
			n.Name = v
		default:
			if ok, err := parseVLANOption(k, v, &n.VLANs); ok {
				if err != nil {
					return NIC{}, err
				}
				continue
			}
			return NIC{}, fmt.Errorf("%w: unknown option %q: want queues=N, mode=auto|copy|zerocopy, csum=auto|fix|off, maxmacs=N, vlan=N, trunk=N+M+... or name=NAME", ErrBadSpec, k)
		}
	}
	// 15 is IFNAMSIZ less its NUL.
	if len(n.Ifname) > 15 {
		return NIC{}, fmt.Errorf("%w: interface name %q: longer than 15 characters", ErrBadSpec, n.Ifname)
	}
	if n.Name == "" {
		return NIC{}, fmt.Errorf("%w: name= is empty: want a port name", ErrBadSpec)
	}
	return n, nil
}
