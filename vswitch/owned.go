package vswitch

import (
	"fmt"
	"log/slog"
	"net"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/xvswitch/xvswitch/portspec"
)

// Owned NIC queues (a vhost port's own=IFNAME:Q[+Q]): a VM owns queues of
// a NIC, and the NIC port binds none of its own sockets there, because
// one (netdev, queue) takes one UMEM and the owner's will be the VM's
// memory (docs/zerocopy.md). The NIC port learns of a change from the
// switch (handOver) and rebuilds its sockets without the owned queues, or
// with them again when their owner goes.

// ErrQueueOwned: another VM owns a queue the port asked for.
var ErrQueueOwned = fmt.Errorf("vswitch: NIC queue owned by another port")

// queueOwners records which vhost port owns which queue of which
// interface. Its own lock: the NIC port reads it while binding, with or
// without the switch's lock held.
type queueOwners struct {
	mu   sync.Mutex
	byIf map[string]map[int]string // ifname -> queue -> owning port
	macs map[string]uint64         // owning port -> its MAC (mac=)
	// fallback: owners whose memory could not back their queues
	// (vmowned.go); their queues are the NIC port's meanwhile.
	fallback map[string]bool
}

// setFallback gives port's queues back to the NIC port (on) or takes
// them again (off); the caller then hands them over.
func (o *queueOwners) setFallback(port string, on bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.fallback == nil {
		o.fallback = map[string]bool{}
	}
	if on {
		o.fallback[port] = true
	} else {
		delete(o.fallback, port)
	}
}

func (o *queueOwners) inFallback(port string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.fallback[port]
}

// claim records that port owns own's queues, or fails if another port
// owns one of them (and then records nothing).
func (o *queueOwners) claim(port string, mac uint64, own portspec.Own) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	qs := o.byIf[own.Ifname]
	for _, q := range own.Queues {
		if other, ok := qs[q]; ok && other != port {
			return fmt.Errorf("%w: %s queue %d is %s's", ErrQueueOwned, own.Ifname, q, other)
		}
	}
	if o.byIf == nil {
		o.byIf = map[string]map[int]string{}
		o.macs = map[string]uint64{}
	}
	o.macs[port] = mac
	if qs == nil {
		qs = map[int]string{}
		o.byIf[own.Ifname] = qs
	}
	for _, q := range own.Queues {
		qs[q] = port
	}
	return nil
}

// release forgets port's queues and says on which interface they were
// ("" when it owned none).
func (o *queueOwners) release(port string) string {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.macs, port)
	delete(o.fallback, port)
	for ifname, qs := range o.byIf {
		found := false
		for q, p := range qs {
			if p == port {
				delete(qs, q)
				found = true
			}
		}
		if found {
			return ifname
		}
	}
	return ""
}

// owner is the port owning queue q of ifname, "" for none, and its MAC.
func (o *queueOwners) owner(ifname string, q int) (string, uint64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	p := o.byIf[ifname][q]
	if o.fallback[p] {
		return "", 0
	}
	return p, o.macs[p]
}

// describe lists ifname's owned queues as `show ports` prints them:
// "1=vm1 2=vm1" ("" for none).
func (o *queueOwners) describe(ifname string) string {
	if o == nil {
		return ""
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	qs := o.byIf[ifname]
	keys := make([]int, 0, len(qs))
	for q := range qs {
		keys = append(keys, q)
	}
	sort.Ints(keys)
	parts := make([]string, len(keys))
	for i, q := range keys {
		parts[i] = strconv.Itoa(q) + "=" + qs[q]
		if o.fallback[qs[q]] {
			parts[i] += "(copy)" // the owner's memory could not back it
		}
	}
	return strings.Join(parts, " ")
}

// handOver makes every NIC port on ifname bind its sockets to what its
// owners leave it: called with s.mu held, after an owner came or went.
func (s *Switch) handOver(ifname string) {
	for _, p := range s.ports {
		if p == nil {
			continue
		}
		if n, ok := p.drv.(*nicPort); ok && n.spec.Ifname == ifname {
			n.resocket(s)
		}
	}
}

// claimQueues records spec's own= before its port is added.
func (s *Switch) claimQueues(spec portspec.Vhost) error {
	if spec.Own == nil {
		return nil
	}
	// ParseVhost insists on mac= with own=; a spec built by hand
	// without one could not be told apart from others' frames.
	hw, err := net.ParseMAC(spec.MAC)
	if err != nil || len(hw) != 6 {
		return fmt.Errorf("vswitch: vhost %s: own= needs the VM's mac=", spec.Name)
	}
	return s.owners.claim(spec.Name, MACKey(hw), *spec.Own)
}

// ownerAdded takes the owned queues from their NIC port once their owner
// is on the switch.
func (s *Switch) ownerAdded(spec portspec.Vhost) {
	if spec.Own == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.handOver(spec.Own.Ifname)
	slog.Info("nic queues owned", "port", spec.Name, "own", spec.Own.String())
}

// ownerGone gives a removed port's queues back to their NIC port. Called
// with s.mu held.
func (s *Switch) ownerGone(name string) {
	if ifname := s.owners.release(name); ifname != "" {
		s.handOver(ifname)
		slog.Info("nic queues given back", "port", name, "ifname", ifname)
	}
}
