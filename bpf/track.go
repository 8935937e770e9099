package bpf

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// resubscribeDelay spaces out attempts to subscribe again after the
// rtnetlink subscription broke.
const resubscribeDelay = time.Second

// dumpTries bounds the retries of a netlink dump that the kernel
// interrupted (the table changed while it was read).
const dumpTries = 5

// tracker is one running TrackHostAddrs.
type tracker struct {
	cancel context.CancelFunc
	done   chan struct{} // closed when its goroutine has returned
}

// trackState is what the tracker last wrote: the interfaces whose
// addresses count, and the addresses (their string form, to skip writing
// an unchanged set).
type trackState struct {
	links map[int]bool
	addrs string
}

// TrackHostAddrs puts the host's addresses on the interface in the host
// address maps, as SetHostAddrs does, and keeps the maps in step with them
// until ctx ends or the Steering is closed.
//
// The host's addresses are those of the interface and of the devices that
// receive through it: VLAN, macvlan and ipvlan devices on top of it, the
// bridge or bond it is a port of, and so on up (a VLAN on that bridge
// too); IPv4 and IPv6, link-local and tentative included, those whose
// duplicate address detection failed excluded. The map value of each is
// the index of the interface it is on.
//
// It returns once the current addresses are in the maps (or with the
// error that kept them out); the tracking goes on in its own goroutine,
// which Close stops and waits for. Attach does not start it: call it right
// after Attach. A second call while one is tracking gives ErrTracking;
// after ctx ends the maps keep the last set and it may be called again.
func (s *Steering) TrackHostAddrs(ctx context.Context) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrClosed
	}
	if s.tracker != nil {
		s.mu.Unlock()
		return fmt.Errorf("%w: %s", ErrTracking, s.ifname)
	}
	tctx, cancel := context.WithCancel(ctx)
	t := &tracker{cancel: cancel, done: make(chan struct{})}
	s.tracker = t
	s.mu.Unlock()

	// Subscribe before reading: a change between the two is then seen.
	sub, err := s.subscribe()
	var st trackState
	if err == nil {
		st, err = s.syncHostAddrs(trackState{})
	}
	if err != nil {
		if sub != nil {
			sub.stop()
		}
		s.endTracking(t)
		return err
	}
	go s.track(tctx, t, sub, st)
	return nil
}

// endTracking forgets t (so TrackHostAddrs may run again) and releases
// whoever waits for it.
func (s *Steering) endTracking(t *tracker) {
	t.cancel()
	s.mu.Lock()
	if s.tracker == t {
		s.tracker = nil
	}
	s.mu.Unlock()
	close(t.done)
}

// stopTracking cancels a running tracker and waits for it. The caller must
// not hold s.mu: the tracker takes it to write the maps.
func stopTracking(t *tracker) {
	if t != nil {
		t.cancel()
		<-t.done
	}
}

// track follows address and link changes; st is what is in the maps now.
func (s *Steering) track(ctx context.Context, t *tracker, sub *netSub, st trackState) {
	defer s.endTracking(t)
	defer func() {
		if sub != nil {
			sub.stop()
		}
	}()
	for {
		broken := false
		select {
		case <-ctx.Done():
			return
		case u, ok := <-sub.addrs:
			if !ok {
				broken = true
			} else if !st.links[u.LinkIndex] {
				continue
			}
		case u, ok := <-sub.links:
			if !ok {
				broken = true
			} else if a := u.Attrs(); !st.links[a.Index] && !st.links[a.MasterIndex] && !st.links[a.ParentIndex] {
				// Neither one of ours nor stacked on one of ours.
				continue
			}
		}
		if broken {
			// The subscription broke (e.g. ENOBUFS: the kernel dropped
			// notifications): subscribe again; changes may have been
			// lost, and the re-read below finds them.
			sub.stop()
			sub = nil
			for sub == nil {
				select {
				case <-ctx.Done():
					return
				case <-time.After(resubscribeDelay):
				}
				var err error
				if sub, err = s.subscribe(); err != nil {
					s.log.Warn("bpf: cannot resubscribe to address changes", "ifname", s.ifname, "err", err)
				}
			}
		}
		// One re-read per burst of changes, and a re-read, not the
		// update itself, so the maps cannot drift from the truth.
		sub.drain()
		now, err := s.syncHostAddrs(st)
		if err != nil {
			if !errors.Is(err, ErrClosed) {
				s.log.Warn("bpf: cannot update host addresses", "ifname", s.ifname, "err", err)
			}
			continue // the next change tries again
		}
		st = now
	}
}

// syncHostAddrs reads the host's addresses on the interface and writes
// them to the maps unless they are those of last; it returns what is in
// the maps now.
func (s *Steering) syncHostAddrs(last trackState) (trackState, error) {
	var links []netlink.Link
	var list []netlink.Addr
	err := retryDump(func() (err error) {
		links, err = netlink.LinkList()
		return err
	})
	if err == nil {
		err = retryDump(func() (err error) {
			list, err = netlink.AddrList(nil, netlink.FAMILY_ALL)
			return err
		})
	}
	if err != nil {
		return last, fmt.Errorf("bpf: read addresses for %s: %w", s.ifname, err)
	}
	info := make([]linkInfo, len(links))
	for i, l := range links {
		a := l.Attrs()
		info[i] = linkInfo{index: a.Index, master: a.MasterIndex, parent: a.ParentIndex, kind: l.Type(), parentElsewhere: a.NetNsID >= 0}
	}
	now := trackState{links: stackedLinks(info, s.ifindex)}
	var addrs []hostAddr
	for _, a := range list {
		// A DAD failure means the address is someone else's.
		if !now.links[a.LinkIndex] || a.IPNet == nil || a.Flags&unix.IFA_F_DADFAILED != 0 {
			continue
		}
		addrs = append(addrs, hostAddr{ip: a.IP, ifindex: a.LinkIndex})
	}
	slices.SortFunc(addrs, func(a, b hostAddr) int { return compareIPs(a.ip, b.ip) })
	addrs, dropped := capPerFamily(addrs, MaxHostAddrs)
	now.addrs = fmt.Sprint(addrs)
	if now.addrs == last.addrs {
		return now, nil
	}
	if dropped > 0 {
		s.log.Warn("bpf: too many host addresses, some left out: peers cannot resolve them while broadcast/multicast is steered",
			"ifname", s.ifname, "left_out", dropped, "max_per_family", MaxHostAddrs)
	}
	if err := s.setHostAddrs(addrs); err != nil {
		return last, err
	}
	s.log.Info("bpf: host addresses", "ifname", s.ifname, "addrs", now.addrs)
	return now, nil
}

func (a hostAddr) String() string { return fmt.Sprintf("%s@%d", a.ip, a.ifindex) }

// capPerFamily keeps the first max addresses of each family.
func capPerFamily(addrs []hostAddr, max int) ([]hostAddr, int) {
	out := addrs[:0]
	n4, n6, dropped := 0, 0, 0
	for _, a := range addrs {
		n := &n6
		if a.ip.To4() != nil {
			n = &n4
		}
		if *n >= max {
			dropped++
			continue
		}
		*n++
		out = append(out, a)
	}
	return out, dropped
}

// retryDump runs a netlink dump again while the kernel says it was
// interrupted by a concurrent change.
func retryDump(dump func() error) error {
	var err error
	for range dumpTries {
		if err = dump(); !errors.Is(err, netlink.ErrDumpInterrupted) {
			return err
		}
	}
	return err
}

// linkInfo is what stackedLinks needs of an interface.
type linkInfo struct {
	index, master, parent int
	kind                  string // netlink's Link.Type(): "vlan", "bridge", ...
	parentElsewhere       bool   // parent index is in another namespace
}

// Kinds of device that receive through their parent (stacked on it) and
// of masters that receive through their ports.
var (
	upperKinds  = []string{"vlan", "macvlan", "macvtap", "ipvlan", "ipvtap"}
	masterKinds = []string{"bridge", "bond"}
)

// stackedLinks is the set of interfaces whose traffic arrives through
// nic: nic, the bridge or bond it is a port of, devices stacked on either
// (a VLAN on nic, a VLAN on the bridge), and so on up to a fixed point.
// A master's other ports are not: they receive on their own.
func stackedLinks(links []linkInfo, nic int) map[int]bool {
	in := map[int]bool{nic: true}
	kind := make(map[int]string, len(links))
	for _, l := range links {
		kind[l.index] = l.kind
	}
	for grew := true; grew; {
		grew = false
		for _, l := range links {
			if in[l.index] && l.master != 0 && !in[l.master] && slices.Contains(masterKinds, kind[l.master]) {
				in[l.master] = true
				grew = true
			}
			if !in[l.index] && l.parent != 0 && in[l.parent] && !l.parentElsewhere && slices.Contains(upperKinds, l.kind) {
				in[l.index] = true
				grew = true
			}
		}
	}
	return in
}

// netSub is an rtnetlink subscription to address and link changes (of all
// interfaces: the kernel has no per-interface groups).
type netSub struct {
	addrs    chan netlink.AddrUpdate
	links    chan netlink.LinkUpdate
	done     chan struct{}
	stopOnce sync.Once
}

func (s *Steering) subscribe() (*netSub, error) {
	n := &netSub{
		addrs: make(chan netlink.AddrUpdate, 64),
		links: make(chan netlink.LinkUpdate, 64),
		done:  make(chan struct{}),
	}
	onErr := func(err error) {
		select {
		case <-n.done: // our own stop closed the socket
		default:
			s.log.Warn("bpf: rtnetlink subscription", "ifname", s.ifname, "err", err)
		}
	}
	if err := netlink.AddrSubscribeWithOptions(n.addrs, n.done, netlink.AddrSubscribeOptions{ErrorCallback: onErr}); err != nil {
		close(n.done) // the library may already wait on it
		return nil, fmt.Errorf("bpf: subscribe to address changes: %w", err)
	}
	if err := netlink.LinkSubscribeWithOptions(n.links, n.done, netlink.LinkSubscribeOptions{ErrorCallback: onErr}); err != nil {
		close(n.done)
		for range n.addrs {
		}
		return nil, fmt.Errorf("bpf: subscribe to link changes: %w", err)
	}
	if s.onSubscribe != nil {
		s.onSubscribe(n)
	}
	return n, nil
}

// drain takes whatever updates are already queued; a closed channel is
// left for the next receive to find.
func (n *netSub) drain() {
	for {
		select {
		case _, ok := <-n.addrs:
			if !ok {
				return
			}
		case _, ok := <-n.links:
			if !ok {
				return
			}
		default:
			return
		}
	}
}

// stop closes the subscription and drains its channels until the
// library's goroutines, which may be blocked sending, close them. Only
// the tracker's goroutine may call it; it may call it again.
func (n *netSub) stop() {
	n.close()
	for range n.addrs {
	}
	for range n.links {
	}
}

// close ends the subscription: the library closes its sockets, and then
// its channels.
func (n *netSub) close() { n.stopOnce.Do(func() { close(n.done) }) }
