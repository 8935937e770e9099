package bpf

import (
	"errors"
	"fmt"
	"net"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// MaxQueues is the number of XSKMAP slots: rx queues 0..MaxQueues-1 can be
// steered (XVS_MAX_QUEUES in steer.c).
const MaxQueues = 256

// MaxMACs is how many VM MACs one interface's map holds (XVS_MAX_MACS).
const MaxMACs = 4096

// Interface is the name of the interface the program is attached to.
func (s *Steering) Interface() string { return s.ifname }

// Ifindex is the index the interface had at Attach.
func (s *Steering) Ifindex() int { return s.ifindex }

// XDPMode is the mode the program got attached in (XDPDriver or XDPGeneric).
func (s *Steering) XDPMode() XDPMode { return s.xdpMode }

// PinDir is the directory holding this interface's pins.
func (s *Steering) PinDir() string { return s.dir }

// SetPolicy replaces the interface's policy; frames already in flight on
// other CPUs may still see the old one.
func (s *Steering) SetPolicy(p Policy) error {
	if err := p.validate(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	return s.writePolicy(p)
}

func (s *Steering) writePolicy(p Policy) error {
	c := p.toC()
	if err := s.objs.Config.Update(uint32(0), &c, ebpf.UpdateAny); err != nil {
		return fmt.Errorf("bpf: set policy of %s: %w", s.ifname, err)
	}
	return nil
}

// Policy reads the interface's policy back from the map.
func (s *Steering) Policy() (Policy, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return Policy{}, ErrClosed
	}
	var c steerXvsConfig
	if err := s.objs.Config.Lookup(uint32(0), &c); err != nil {
		return Policy{}, fmt.Errorf("bpf: read policy of %s: %w", s.ifname, err)
	}
	return policyFromC(c), nil
}

func macKey(mac net.HardwareAddr) (steerXvsMac, error) { return macVLANKey(mac, 0) }

// macVLANKey is the `macs` key of mac in VLAN vlan.
func macVLANKey(mac net.HardwareAddr, vlan uint16) (steerXvsMac, error) {
	k := steerXvsMac{Vlan: vlan}
	if vlan > MaxVLAN {
		return k, fmt.Errorf("%w: VLAN %d: want 0..%d", ErrMAC, vlan, MaxVLAN)
	}
	if len(mac) != 6 {
		return k, fmt.Errorf("%w: %q is not 6 bytes", ErrMAC, mac.String())
	}
	if mac[0]&1 != 0 {
		// The program classifies group addresses before it looks up the
		// map: such an entry would never match.
		return k, fmt.Errorf("%w: %s is a group address (use Policy.Broadcast/Multicast)", ErrMAC, mac)
	}
	copy(k.Addr[:], mac)
	if k.Addr == ([6]uint8{}) {
		return k, fmt.Errorf("%w: all-zero address", ErrMAC)
	}
	return k, nil
}

// MaxVLAN is the highest VLAN id a MAC can be steered in.
const MaxVLAN = 4094

// AddMAC makes frames to mac the switch's (in ModeMAC), untagged frames
// on a NIC whose Policy.NativeVLAN is 0: AddVLANMAC(mac, 0, port).
func (s *Steering) AddMAC(mac net.HardwareAddr, port uint32) error {
	return s.AddVLANMAC(mac, 0, port)
}

// AddVLANMAC makes frames to mac in VLAN vlan the switch's (in ModeMAC):
// frames tagged vlan, or untagged when vlan is the Policy's NativeVLAN.
// port is recorded beside it for people reading `bpftool map dump` (the
// program ignores it). Adding a MAC again updates its port.
func (s *Steering) AddVLANMAC(mac net.HardwareAddr, vlan uint16, port uint32) error {
	k, err := macVLANKey(mac, vlan)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	v := steerXvsMacOwner{Port: port}
	if err := s.objs.Macs.Update(&k, &v, ebpf.UpdateAny); err != nil {
		if errors.Is(err, unix.E2BIG) {
			return fmt.Errorf("%w: %s on %s (%d entries)", ErrMACMapFull, mac, s.ifname, MaxMACs)
		}
		return fmt.Errorf("bpf: add MAC %s on %s: %w", mac, s.ifname, err)
	}
	return nil
}

// RemoveMAC stops steering frames to mac in VLAN 0.
func (s *Steering) RemoveMAC(mac net.HardwareAddr) error { return s.RemoveVLANMAC(mac, 0) }

// RemoveVLANMAC stops steering frames to mac in VLAN vlan.
func (s *Steering) RemoveVLANMAC(mac net.HardwareAddr, vlan uint16) error {
	k, err := macVLANKey(mac, vlan)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	if err := s.objs.Macs.Delete(&k); err != nil {
		if errors.Is(err, ebpf.ErrKeyNotExist) {
			return fmt.Errorf("%w: %s on %s", ErrMACNotFound, mac, s.ifname)
		}
		return fmt.Errorf("bpf: remove MAC %s on %s: %w", mac, s.ifname, err)
	}
	return nil
}

// MACs returns the MAC map: address (net.HardwareAddr.String form) to
// port; an address in a VLAN other than 0 is "ADDRESS/VLAN".
func (s *Steering) MACs() (map[string]uint32, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrClosed
	}
	out := make(map[string]uint32)
	var k steerXvsMac
	var v steerXvsMacOwner
	it := s.objs.Macs.Iterate()
	for it.Next(&k, &v) {
		name := net.HardwareAddr(k.Addr[:]).String()
		if k.Vlan != 0 {
			name += fmt.Sprintf("/%d", k.Vlan)
		}
		out[name] = v.Port
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("bpf: list MACs of %s: %w", s.ifname, err)
	}
	return out, nil
}

// SetSocket puts the AF_XDP socket fd in queue's XSKMAP slot, replacing
// whatever was there. The socket must be bound to this interface and
// queue, or the kernel drops what the program redirects to it. Remove it
// (RemoveSocket) before closing it: the kernel empties the slot of a
// closed socket, but our record would still name the old fd.
func (s *Steering) SetSocket(queue uint32, fd int) error {
	if queue >= MaxQueues {
		return fmt.Errorf("%w: %d >= %d", ErrQueue, queue, MaxQueues)
	}
	if fd < 0 {
		return fmt.Errorf("%w: fd %d", ErrSocket, fd)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	if err := s.objs.Xsks.Update(queue, uint32(fd), ebpf.UpdateAny); err != nil {
		return fmt.Errorf("%w: fd %d in queue %d of %s: %v", ErrSocket, fd, queue, s.ifname, err)
	}
	s.sockets[queue] = fd
	return nil
}

// RemoveSocket empties queue's slot: its frames go to the kernel again
// (counted as NoSocketPassed while the policy steers them).
func (s *Steering) RemoveSocket(queue uint32) error {
	if queue >= MaxQueues {
		return fmt.Errorf("%w: %d >= %d", ErrQueue, queue, MaxQueues)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	if _, ok := s.sockets[queue]; !ok {
		return fmt.Errorf("%w: queue %d of %s", ErrNoSocket, queue, s.ifname)
	}
	// ErrKeyNotExist: the socket was closed and the kernel emptied the slot.
	if err := s.objs.Xsks.Delete(queue); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return fmt.Errorf("bpf: remove socket of queue %d of %s: %w", queue, s.ifname, err)
	}
	delete(s.sockets, queue)
	return nil
}

// Socket returns the fd we put in queue's slot, if any.
func (s *Steering) Socket(queue uint32) (fd int, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fd, ok = s.sockets[queue]
	return fd, ok
}

// Sockets returns a copy of our record of the XSKMAP: queue to fd.
func (s *Steering) Sockets() map[uint32]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[uint32]int, len(s.sockets))
	for q, fd := range s.sockets {
		out[q] = fd
	}
	return out
}

// Counters reads the per-verdict counters, summed over CPUs. Each CPU's
// copy is read at a slightly different moment: while frames flow, the sum
// is a snapshot of each field, not of all of them at one instant.
func (s *Steering) Counters() (Counters, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return Counters{}, ErrClosed
	}
	var perCPU []steerXvsCounters
	if err := s.objs.Counters.Lookup(uint32(0), &perCPU); err != nil {
		return Counters{}, fmt.Errorf("bpf: read counters of %s: %w", s.ifname, err)
	}
	return sumCounters(perCPU), nil
}
