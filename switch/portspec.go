package vswitch

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
)

// ErrBadSpec means a port or cross-connect specification does not parse.
var ErrBadSpec = errors.New("bad port spec")

// NICMode is how AF_XDP sockets bind to a NIC queue.
type NICMode string

const (
	ModeAuto     NICMode = "auto" // try zero-copy, fall back to copy
	ModeCopy     NICMode = "copy"
	ModeZeroCopy NICMode = "zerocopy"
)

// NICSpec is an AF_XDP port: `IFNAME[,queues=N][,mode=auto|copy|zerocopy][,name=NAME]`.
type NICSpec struct {
	Name   string  `json:"name"`
	Ifname string  `json:"ifname"`
	Queues int     `json:"queues,omitempty"` // 0: all of the NIC's queues
	Mode   NICMode `json:"mode"`
}

// VhostSpec is a vhost-user port:
// `PATH[,client][,queues=N][,mac=MAC][,name=NAME][,mode=OCTAL][,group=NAME|GID]`.
type VhostSpec struct {
	Name   string `json:"name"`
	Path   string `json:"path"`
	Client bool   `json:"client,omitempty"` // xvswitch connects (QEMU server=on)
	Queues int    `json:"queues"`           // queue pairs, default 1
	MAC    string `json:"mac,omitempty"`    // the guest's MAC, if known
	// Mode and GID are the socket file's permissions and group in server
	// mode (default 0660 and root's group), e.g. group=kvm for QEMU
	// running as an unprivileged user.
	Mode os.FileMode `json:"mode,omitempty"`
	GID  int         `json:"gid,omitempty"`
}

// XConnect joins two ports: everything one receives goes out of the other.
type XConnect struct {
	A string `json:"a"`
	B string `json:"b"`
}

// splitSpec splits "head,k=v,flag" into head and options.
func splitSpec(s string) (string, map[string]string, error) {
	parts := strings.Split(s, ",")
	if parts[0] == "" {
		return "", nil, fmt.Errorf("%w: %q: empty", ErrBadSpec, s)
	}
	opts := map[string]string{}
	for _, p := range parts[1:] {
		k, v, _ := strings.Cut(p, "=")
		if k == "" {
			return "", nil, fmt.Errorf("%w: %q: empty option", ErrBadSpec, s)
		}
		if _, dup := opts[k]; dup {
			return "", nil, fmt.Errorf("%w: %q: %s given twice", ErrBadSpec, s, k)
		}
		opts[k] = v
	}
	return parts[0], opts, nil
}

func positive(s, what string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > 256 {
		return 0, fmt.Errorf("%w: %s=%q: want 1..256", ErrBadSpec, what, s)
	}
	return n, nil
}

// ParseNIC parses a --nic value.
func ParseNIC(s string) (NICSpec, error) {
	head, opts, err := splitSpec(s)
	if err != nil {
		return NICSpec{}, err
	}
	n := NICSpec{Ifname: head, Name: head, Mode: ModeAuto}
	for k, v := range opts {
		switch k {
		case "queues":
			if n.Queues, err = positive(v, k); err != nil {
				return NICSpec{}, err
			}
		case "mode":
			switch m := NICMode(v); m {
			case ModeAuto, ModeCopy, ModeZeroCopy:
				n.Mode = m
			default:
				return NICSpec{}, fmt.Errorf("%w: mode=%q: want auto, copy or zerocopy", ErrBadSpec, v)
			}
		case "name":
			n.Name = v
		default:
			return NICSpec{}, fmt.Errorf("%w: --nic %q: unknown option %q", ErrBadSpec, s, k)
		}
	}
	if n.Name == "" || len(n.Ifname) > 15 {
		return NICSpec{}, fmt.Errorf("%w: --nic %q: bad name or interface", ErrBadSpec, s)
	}
	return n, nil
}

// ParseVhost parses a --vhost value.
func ParseVhost(s string) (VhostSpec, error) {
	head, opts, err := splitSpec(s)
	if err != nil {
		return VhostSpec{}, err
	}
	base := filepath.Base(head)
	v := VhostSpec{Path: head, Queues: 1, Name: strings.TrimSuffix(base, filepath.Ext(base))}
	for k, val := range opts {
		switch k {
		case "client":
			if val != "" {
				return VhostSpec{}, fmt.Errorf("%w: client takes no value", ErrBadSpec)
			}
			v.Client = true
		case "queues":
			if v.Queues, err = positive(val, k); err != nil {
				return VhostSpec{}, err
			}
		case "mac":
			hw, err := net.ParseMAC(val)
			if err != nil || len(hw) != 6 || hw[0]&1 != 0 {
				return VhostSpec{}, fmt.Errorf("%w: mac=%q: want a unicast Ethernet address", ErrBadSpec, val)
			}
			v.MAC = hw.String()
		case "name":
			v.Name = val
		case "mode":
			m, err := strconv.ParseUint(val, 8, 32)
			if err != nil || m == 0 || m > 0o777 {
				return VhostSpec{}, fmt.Errorf("%w: mode=%q: want octal permissions like 0660", ErrBadSpec, val)
			}
			v.Mode = os.FileMode(m)
		case "group":
			gid, err := strconv.Atoi(val)
			if err != nil {
				g, lerr := user.LookupGroup(val)
				if lerr != nil {
					return VhostSpec{}, fmt.Errorf("%w: group=%q: %v", ErrBadSpec, val, lerr)
				}
				gid, _ = strconv.Atoi(g.Gid)
			}
			v.GID = gid
		default:
			return VhostSpec{}, fmt.Errorf("%w: --vhost %q: unknown option %q", ErrBadSpec, s, k)
		}
	}
	if v.Name == "" {
		return VhostSpec{}, fmt.Errorf("%w: --vhost %q: empty name", ErrBadSpec, s)
	}
	return v, nil
}

// ParseXConnect parses a --xconnect value, NAME=NAME.
func ParseXConnect(s string) (XConnect, error) {
	a, b, ok := strings.Cut(s, "=")
	if !ok || a == "" || b == "" || a == b {
		return XConnect{}, fmt.Errorf("%w: --xconnect %q: want NAME=NAME of two different ports", ErrBadSpec, s)
	}
	return XConnect{A: a, B: b}, nil
}

// ParseCPUList parses "0,2-3" into CPU numbers.
func ParseCPUList(s string) ([]int, error) {
	var cpus []int
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil || a < 0 {
			return nil, fmt.Errorf("%w: cpu list %q", ErrBadSpec, s)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a {
				return nil, fmt.Errorf("%w: cpu list %q", ErrBadSpec, s)
			}
		}
		for c := a; c <= b; c++ {
			cpus = append(cpus, c)
		}
	}
	return cpus, nil
}
