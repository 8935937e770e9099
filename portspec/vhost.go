package portspec

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
)

// Vhost is a vhost-user port:
// `PATH[,client][,queues=N][,mac=MAC][,spoof=allow|drop][,maxmacs=N][,offloads=on|off][,own=IFNAME:Q[+Q]][,vlan=N][,trunk=N+M+...][,name=NAME][,mode=OCTAL][,group=NAME|GID]`.
type Vhost struct {
	Name   string `json:"name"`
	Path   string `json:"path"`
	Client bool   `json:"client,omitempty"` // xvswitch connects (QEMU server=on)
	Queues int    `json:"queues"`           // queue pairs, default 1
	MAC    string `json:"mac,omitempty"`    // the guest's MAC, if known
	// AllowSpoof (spoof=allow) lets a guest with a configured MAC send
	// from other source MACs too (a guest that bridges or changes its
	// MAC). By default, with mac=, frames from any other source are
	// dropped: the zero value is the secure one.
	AllowSpoof bool `json:"allow_spoof,omitempty"`
	// MaxMACs (maxmacs=N) is how many learned MACs the port may hold in
	// the FDB at once; 0 means the switch's default for a VM port.
	MaxMACs int `json:"maxmacs,omitempty"`
	// NoOffloads (offloads=off) offers the guest no checksum or
	// segmentation offloads (docs/offloads.md); they are on by default.
	NoOffloads bool `json:"no_offloads,omitempty"`
	// Own (own=IFNAME:Q[+Q]) names the NIC queues this VM owns; nil
	// when it owns none and all its NIC traffic takes the copy path.
	Own *Own `json:"own,omitempty"`
	// VLANs (vlan=N, trunk=N+M+...) are the port's 802.1Q settings.
	VLANs
	// Mode and GID are the socket file's permissions and group in server
	// mode (default 0660 and root's group), e.g. group=kvm for QEMU
	// running as an unprivileged user.
	Mode os.FileMode `json:"mode,omitempty"`
	GID  int         `json:"gid,omitempty"`
}

// ParseVhost parses a --vhost value. The port's name defaults to the
// socket file's name without its extension.
func ParseVhost(s string) (Vhost, error) {
	head, opts, err := split(s)
	if err != nil {
		return Vhost{}, err
	}
	base := filepath.Base(head)
	v := Vhost{Path: head, Queues: 1, Name: strings.TrimSuffix(base, filepath.Ext(base))}
	spoofSet := false
	for k, val := range opts {
		switch k {
		case "client":
			if val != "" {
				return Vhost{}, fmt.Errorf("%w: client=%s: client takes no value", ErrBadSpec, val)
			}
			v.Client = true
		case "queues":
			if v.Queues, err = positive(val, k); err != nil {
				return Vhost{}, err
			}
		case "mac":
			hw, err := net.ParseMAC(val)
			if err != nil || len(hw) != 6 || hw[0]&1 != 0 {
				return Vhost{}, fmt.Errorf("%w: mac=%q: want a unicast Ethernet address", ErrBadSpec, val)
			}
			v.MAC = hw.String()
		case "spoof":
			if v.AllowSpoof, err = allowSpoof(val); err != nil {
				return Vhost{}, err
			}
			spoofSet = true
		case "maxmacs":
			if v.MaxMACs, err = maxMACs(val); err != nil {
				return Vhost{}, err
			}
		case "offloads":
			switch val {
			case "on":
				v.NoOffloads = false
			case "off":
				v.NoOffloads = true
			default:
				return Vhost{}, fmt.Errorf("%w: offloads=%q: want on or off", ErrBadSpec, val)
			}
		case "own":
			o, err := ParseOwn(val)
			if err != nil {
				return Vhost{}, err
			}
			v.Own = &o
		case "name":
			v.Name = val
		case "mode":
			if v.Mode, err = ParseMode(val); err != nil {
				return Vhost{}, fmt.Errorf("%w: mode=%q: %v", ErrBadSpec, val, err)
			}
		case "group":
			if v.GID, err = ParseGroup(val); err != nil {
				return Vhost{}, fmt.Errorf("%w: group=%q: no such group (want a group name or GID): %v", ErrBadSpec, val, err)
			}
		default:
			if ok, err := parseVLANOption(k, val, &v.VLANs); ok {
				if err != nil {
					return Vhost{}, err
				}
				continue
			}
			return Vhost{}, fmt.Errorf("%w: unknown option %q: want client, queues=N, mac=MAC, spoof=allow|drop, maxmacs=N, offloads=on|off, own=IFNAME:Q[+Q], vlan=N, trunk=N+M+..., name=NAME, mode=OCTAL or group=NAME|GID", ErrBadSpec, k)
		}
	}
	if v.Name == "" {
		return Vhost{}, fmt.Errorf("%w: the port name is empty: give one with name=NAME", ErrBadSpec)
	}
	// Source MACs are checked against mac=; without one, spoof= would
	// promise a check that cannot happen.
	if spoofSet && v.MAC == "" {
		return Vhost{}, fmt.Errorf("%w: --vhost %q: spoof= needs mac=", ErrBadSpec, s)
	}
	// Only the owner's unicast may be steered into its memory: the XDP
	// program needs the MAC to tell which frames those are.
	if v.Own != nil && v.MAC == "" {
		return Vhost{}, fmt.Errorf("%w: --vhost %q: own= needs mac=", ErrBadSpec, s)
	}
	// Frames on owned queues go from the wire into the VM's memory
	// without the switch (docs/zerocopy.md): nothing there can push or
	// pop a tag, so a VLAN port takes the copy path (docs/vlans.md).
	if v.Own != nil && v.VLANs.IsSet() {
		return Vhost{}, fmt.Errorf("%w: --vhost %q: own= cannot be combined with vlan= or trunk= (tags are pushed and popped on the copy path only)", ErrBadSpec, s)
	}
	return v, nil
}
