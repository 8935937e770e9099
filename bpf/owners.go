package bpf

import (
	"fmt"
	"net"

	"github.com/cilium/ebpf"
)

// Owned queues: a VM that owns an rx queue of the interface has its
// socket there on its own memory, so the program redirects to that queue
// only frames to the VM's MAC; any other frame arriving there is passed
// to the kernel (Counters.OwnedQueuePassed). The map `queue_owners` holds
// one entry per queue, all zero (not owned) until set.

// SetQueueOwner marks queue as owned by the VM with the unicast MAC mac.
func (s *Steering) SetQueueOwner(queue uint32, mac net.HardwareAddr) error {
	if queue >= MaxQueues {
		return fmt.Errorf("%w: %d >= %d", ErrQueue, queue, MaxQueues)
	}
	k, err := macKey(mac) // refuses group and all-zero addresses
	if err != nil {
		return err
	}
	v := steerXvsQueueOwner{Addr: k.Addr, Owned: 1}
	return s.writeQueueOwner(queue, v)
}

// ClearQueueOwner makes queue an ordinary one again.
func (s *Steering) ClearQueueOwner(queue uint32) error {
	if queue >= MaxQueues {
		return fmt.Errorf("%w: %d >= %d", ErrQueue, queue, MaxQueues)
	}
	return s.writeQueueOwner(queue, steerXvsQueueOwner{})
}

func (s *Steering) writeQueueOwner(queue uint32, v steerXvsQueueOwner) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	if err := s.objs.QueueOwners.Update(queue, &v, ebpf.UpdateAny); err != nil {
		return fmt.Errorf("bpf: set owner of queue %d of %s: %w", queue, s.ifname, err)
	}
	return nil
}

// QueueOwners reads the owned queues back from the map: queue to MAC.
func (s *Steering) QueueOwners() (map[uint32]net.HardwareAddr, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrClosed
	}
	out := map[uint32]net.HardwareAddr{}
	var q uint32
	var v steerXvsQueueOwner
	it := s.objs.QueueOwners.Iterate()
	for it.Next(&q, &v) {
		if v.Owned != 0 {
			out[q] = append(net.HardwareAddr(nil), v.Addr[:]...)
		}
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("bpf: read queue owners of %s: %w", s.ifname, err)
	}
	return out, nil
}
