package vswitch

import (
	"sync"

	"github.com/xvswitch/xvswitch/afpacket"
	"github.com/xvswitch/xvswitch/xsk"
)

// ownerSocketStats are the AF_XDP statistics of the VM owners' sockets on
// a NIC port's queues (vmowned.go), counted among the port's kernel
// counters like its own sockets': with the zero-copy path the fill ring
// holds only the guest's buffers, and a frame that finds none is the
// kernel's drop (af_xdp_rx_dropped). The lock keeps a socket from being
// read after it closed: owners retire a socket before closing it.
type ownerSocketStats struct {
	mu      sync.Mutex
	live    map[*xsk.Socket]bool
	retired map[string]uint64
}

func (o *ownerSocketStats) add(s *xsk.Socket) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.live == nil {
		o.live = map[*xsk.Socket]bool{}
	}
	o.live[s] = true
}

// retire keeps s's last statistics and forgets it; before s closes.
func (o *ownerSocketStats) retire(s *xsk.Socket) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.live[s] {
		return
	}
	delete(o.live, s)
	if o.retired == nil {
		o.retired = map[string]uint64{}
	}
	if st, err := s.Stats(); err == nil {
		addKernelCounts(o.retired, zeroVerdicts, []xsk.Stats{st}, afpacket.Stats{})
	}
}

// addTo adds the owners' socket statistics to k.
func (o *ownerSocketStats) addTo(k map[string]uint64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for name, n := range o.retired {
		k[name] += n
	}
	var live []xsk.Stats
	for s := range o.live {
		if st, err := s.Stats(); err == nil {
			live = append(live, st)
		}
	}
	addKernelCounts(k, zeroVerdicts, live, afpacket.Stats{})
}
