package bpf

import (
	"context"
	"fmt"
	"net"
	"slices"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// resubscribeDelay spaces out attempts to subscribe again after the
// address subscription broke.
const resubscribeDelay = time.Second

// tracker is one running TrackHostAddrs.
type tracker struct {
	cancel context.CancelFunc
	done   chan struct{} // closed when its goroutine has returned
}

// TrackHostAddrs puts the interface's current addresses (IPv4 and IPv6,
// link-local included, tentative included, DAD-failed excluded) in the
// host address maps, as SetHostAddrs does, and keeps the maps in step with
// the interface's addresses until ctx ends or the Steering is closed.
//
// It returns once the current addresses are in the maps (or with the
// error that kept them out); the tracking goes on in its own goroutine,
// which Close stops and waits for. Attach does not start it: call it right
// after Attach. A second call while one is tracking gives ErrTracking;
// after ctx ends the maps keep the last set and it may be called again.
//
// Only the interface's own addresses count: addresses of a bridge or bond
// it is enslaved to, or of VLAN devices on top of it, are not tracked.
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

	// Subscribe before listing: a change between the two is then seen.
	sub, err := s.subscribeAddrs()
	var last string
	if err == nil {
		last, err = s.syncHostAddrs("")
	}
	if err != nil {
		if sub != nil {
			sub.stop()
		}
		s.endTracking(t)
		return err
	}
	go s.track(tctx, t, sub, last)
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

// track follows address changes; last is the set now in the maps.
func (s *Steering) track(ctx context.Context, t *tracker, sub *addrSub, last string) {
	defer s.endTracking(t)
	defer func() {
		if sub != nil {
			sub.stop()
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case u, ok := <-sub.ch:
			if !ok {
				// The subscription broke (e.g. ENOBUFS: the kernel
				// dropped notifications): subscribe again and re-read
				// everything, since changes may have been lost.
				sub = nil
				for sub == nil {
					select {
					case <-ctx.Done():
						return
					case <-time.After(resubscribeDelay):
					}
					var err error
					if sub, err = s.subscribeAddrs(); err != nil {
						s.log.Warn("bpf: cannot resubscribe to address changes", "ifname", s.ifname, "err", err)
					}
				}
				last = s.resync(last)
				continue
			}
			if u.LinkIndex != s.ifindex {
				continue
			}
			// One dump per burst of changes, and a dump, not the
			// update itself, so the maps cannot drift from the truth.
			drainUpdates(sub.ch)
			last = s.resync(last)
		}
	}
}

// drainUpdates takes whatever updates are already queued; a closed
// channel is left for the caller's next receive to find.
func drainUpdates(ch <-chan netlink.AddrUpdate) {
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return
			}
		default:
			return
		}
	}
}

// resync is syncHostAddrs for the tracker: failures are logged, and the
// next change tries again.
func (s *Steering) resync(last string) string {
	now, err := s.syncHostAddrs(last)
	if err != nil {
		s.log.Warn("bpf: cannot update host addresses", "ifname", s.ifname, "err", err)
		return last
	}
	return now
}

// syncHostAddrs reads the interface's addresses and writes them to the
// maps unless they are last (their string form); it returns the set now
// in the maps.
func (s *Steering) syncHostAddrs(last string) (string, error) {
	lk := &netlink.Device{LinkAttrs: netlink.LinkAttrs{Index: s.ifindex}}
	list, err := netlink.AddrList(lk, netlink.FAMILY_ALL)
	if err != nil {
		return last, fmt.Errorf("bpf: list addresses of %s: %w", s.ifname, err)
	}
	ips := make([]net.IP, 0, len(list))
	for _, a := range list {
		// A DAD failure means the address is someone else's.
		if a.Flags&unix.IFA_F_DADFAILED != 0 || a.IPNet == nil {
			continue
		}
		ips = append(ips, a.IP)
	}
	slices.SortFunc(ips, compareIPs)
	now := fmt.Sprint(ips)
	if now == last {
		return last, nil
	}
	if err := s.SetHostAddrs(ips); err != nil {
		return last, err
	}
	s.log.Info("bpf: host addresses", "ifname", s.ifname, "addrs", now)
	return now, nil
}

// addrSub is a netlink subscription to address changes (all interfaces:
// the kernel has no per-interface groups).
type addrSub struct {
	ch   chan netlink.AddrUpdate
	done chan struct{}
}

func (s *Steering) subscribeAddrs() (*addrSub, error) {
	a := &addrSub{ch: make(chan netlink.AddrUpdate, 64), done: make(chan struct{})}
	err := netlink.AddrSubscribeWithOptions(a.ch, a.done, netlink.AddrSubscribeOptions{
		ErrorCallback: func(err error) {
			select {
			case <-a.done: // our own stop closed the socket
			default:
				s.log.Warn("bpf: address subscription", "ifname", s.ifname, "err", err)
			}
		},
	})
	if err != nil {
		close(a.done) // the library may already wait on it
		return nil, fmt.Errorf("bpf: subscribe to address changes: %w", err)
	}
	return a, nil
}

// stop closes the subscription and drains its channel until the library's
// goroutine, which may be blocked sending to it, closes it.
func (a *addrSub) stop() {
	close(a.done)
	for range a.ch {
	}
}
