package bpf

import (
	"fmt"
	"path/filepath"
)

// ProgramID is the kernel's id of this Steering's program: what the
// interface reports as its XDP program (IFLA_XDP_PROG_ID) while the
// program is attached. A watcher compares the two to learn that someone
// detached it, or put another program in its place.
func (s *Steering) ProgramID() uint32 { return s.progID }

// Reattach attaches the program to the interface again after someone
// detached it. Netlink cannot (`ip link set dev X xdp off` is refused
// with EBUSY while a BPF link holds the hook); `bpftool link detach` can,
// and sends no netlink event. The program and its maps are the same
// ones, so the sockets, MACs, host addresses, policy and counters are as
// they were; the new link is pinned in place of the defunct one. It is a
// no-op while the link is still attached. ErrBusy: another program holds
// the hook (it is not ours to remove).
func (s *Steering) Reattach() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	if info, err := s.link.Info(); err == nil {
		if x := info.XDP(); x != nil && x.Ifindex != 0 {
			return nil
		}
	}
	pin := filepath.Join(s.dir, pinLink)
	old := s.link
	// The pin goes first: the new link takes its path. A crash before the
	// new one is pinned leaves no link at all, which is what an unpinned
	// link of a dead process becomes anyway.
	if err := old.Unpin(); err != nil {
		return fmt.Errorf("%w: unpin the detached link of %s: %v", ErrPin, s.ifname, err)
	}
	if _, err := s.attach(s.xdpMode); err != nil {
		return err
	}
	_ = old.Close()
	if err := s.link.Pin(pin); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrPin, pinLink, err)
	}
	s.log.Info("bpf: steering re-attached", "ifname", s.ifname, "xdp_mode", s.xdpMode, "prog_id", s.progID)
	return nil
}
