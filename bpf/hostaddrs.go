package bpf

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"slices"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// MaxHostAddrs is how many host addresses of each family (IPv4, IPv6) one
// interface's maps hold (XVS_MAX_HOST_ADDRS in steer.c).
const MaxHostAddrs = 256

// hostAddr is one of the host's addresses and the interface it is on.
type hostAddr struct {
	ip      net.IP
	ifindex int
}

// hostKeys sorts addrs into entries of the two maps (key: the address,
// value: its interface), rejecting what can never be the target of
// address resolution.
func hostKeys(addrs []hostAddr) (map[steerXvsIp4]uint32, map[steerXvsIp6]uint32, error) {
	v4 := make(map[steerXvsIp4]uint32)
	v6 := make(map[steerXvsIp6]uint32)
	for _, a := range addrs {
		ip := a.ip
		if len(ip) != net.IPv4len && len(ip) != net.IPv6len {
			return nil, nil, fmt.Errorf("%w: %d bytes", ErrHostAddr, len(ip))
		}
		if ip.IsUnspecified() || ip.IsMulticast() {
			return nil, nil, fmt.Errorf("%w: %s is not a unicast address", ErrHostAddr, ip)
		}
		// An IPv4-mapped IPv6 address is how net.IP often holds IPv4:
		// ARP asks for the 4-byte form.
		if ip4 := ip.To4(); ip4 != nil {
			var k steerXvsIp4
			copy(k.Addr[:], ip4)
			v4[k] = uint32(a.ifindex)
			continue
		}
		var k steerXvsIp6
		copy(k.Addr[:], ip)
		v6[k] = uint32(a.ifindex)
	}
	if len(v4) > MaxHostAddrs || len(v6) > MaxHostAddrs {
		return nil, nil, fmt.Errorf("%w: %d IPv4 and %d IPv6 addresses (at most %d each)", ErrHostAddrMapFull, len(v4), len(v6), MaxHostAddrs)
	}
	return v4, v6, nil
}

// SetHostAddrs replaces the set of the host's own addresses on the
// interface: in ModeMAC, broadcast and multicast ARP packets and IPv6
// Neighbor Solicitations whose target is one of them go to the kernel even
// when the policy steers broadcast and multicast to the switch, so peers
// can still resolve the host's addresses (counted as HostARPPassed and
// HostNDPassed). IPv4 addresses may be given in either net.IP form.
//
// Stale entries are deleted before new ones are added, and addresses in
// both the old and the new set are never removed, so frames for them are
// never steered away in between. While TrackHostAddrs runs it replaces the
// set at the next change of the interface's (or a stacked device's)
// addresses or links.
func (s *Steering) SetHostAddrs(addrs []net.IP) error {
	ha := make([]hostAddr, len(addrs))
	for i, ip := range addrs {
		ha[i] = hostAddr{ip: ip, ifindex: s.ifindex}
	}
	return s.setHostAddrs(ha)
}

func (s *Steering) setHostAddrs(addrs []hostAddr) error {
	v4, v6, err := hostKeys(addrs)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	if err := replaceSet(s.objs.HostV4, v4); err != nil {
		return fmt.Errorf("bpf: set IPv4 host addresses of %s: %w", s.ifname, err)
	}
	if err := replaceSet(s.objs.HostV6, v6); err != nil {
		return fmt.Errorf("bpf: set IPv6 host addresses of %s: %w", s.ifname, err)
	}
	return nil
}

// replaceSet makes the entries of m exactly want (key: address, value:
// ifindex).
func replaceSet[K comparable](m *ebpf.Map, want map[K]uint32) error {
	var stale []K
	var k K
	var v steerXvsHostAddr
	it := m.Iterate()
	for it.Next(&k, &v) {
		if _, ok := want[k]; !ok {
			stale = append(stale, k)
		}
	}
	if err := it.Err(); err != nil {
		return err
	}
	for _, k := range stale {
		if err := m.Delete(&k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return err
		}
	}
	for k, ifindex := range want {
		val := steerXvsHostAddr{Ifindex: ifindex}
		if err := m.Update(&k, &val, ebpf.UpdateAny); err != nil {
			if errors.Is(err, unix.E2BIG) {
				return fmt.Errorf("%w: %v", ErrHostAddrMapFull, err)
			}
			return err
		}
	}
	return nil
}

// HostAddrs reads the host address maps back: IPv4 addresses (4-byte
// form) first, then IPv6, each in byte order.
func (s *Steering) HostAddrs() ([]net.IP, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrClosed
	}
	var out []net.IP
	var v steerXvsHostAddr
	var k4 steerXvsIp4
	it := s.objs.HostV4.Iterate()
	for it.Next(&k4, &v) {
		out = append(out, net.IP(bytes.Clone(k4.Addr[:])))
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("bpf: list IPv4 host addresses of %s: %w", s.ifname, err)
	}
	var k6 steerXvsIp6
	it = s.objs.HostV6.Iterate()
	for it.Next(&k6, &v) {
		out = append(out, net.IP(bytes.Clone(k6.Addr[:])))
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("bpf: list IPv6 host addresses of %s: %w", s.ifname, err)
	}
	slices.SortFunc(out, compareIPs)
	return out, nil
}

// compareIPs orders shorter (IPv4) addresses first, then by bytes.
func compareIPs(a, b net.IP) int {
	if len(a) != len(b) {
		return len(a) - len(b)
	}
	return bytes.Compare(a, b)
}
