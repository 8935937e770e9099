package vswitch

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/vishvananda/netlink"
)

// nicCheckInterval is how often a NIC port looks at its interface when
// netlink says nothing: the kernel sends no event when an XDP program is
// detached (bpftool link detach), and a subscription can lose events
// (ENOBUFS). Link changes themselves arrive as events, at once.
var nicCheckInterval = time.Second

// nicWatch is the goroutine that follows a NIC port's interface.
type nicWatch struct {
	cancel context.CancelFunc
	done   chan struct{}
}

func startNICWatch(p *nicPort, sw *Switch) *nicWatch {
	ctx, cancel := context.WithCancel(context.Background())
	w := &nicWatch{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		p.follow(ctx, sw)
	}()
	return w
}

// stop ends the watcher and waits for it. The caller may hold the
// switch's lock: the watcher gives up waiting for it (lockSwitch).
func (w *nicWatch) stop() {
	if w != nil {
		w.cancel()
		<-w.done
	}
}

// follow checks the interface at every link event that may concern it and
// every nicCheckInterval, until ctx ends.
func (p *nicPort) follow(ctx context.Context, sw *Switch) {
	var sub *linkSub
	defer func() { sub.stop() }()
	tick := time.NewTicker(nicCheckInterval)
	defer tick.Stop()
	for {
		// Subscribe before looking: a change between the two is then seen.
		if sub == nil {
			var err error
			if sub, err = subscribeLinks(); err != nil {
				slog.Debug("nic: no link events, checking every interval", "port", p.spec.Name, "err", err)
			}
		}
		p.check(ctx, sw)
		for wait := true; wait; {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				wait = false
			case u, ok := <-sub.updates():
				if !ok {
					// The subscription broke (the kernel dropped events):
					// subscribe again, and look, since changes were lost.
					sub.stop()
					sub = nil
					wait = false
				} else if a := u.Attrs(); a.Name == p.spec.Ifname || p.bound != nil && a.Index == p.bound.ifindex {
					wait = false
				}
			}
		}
		sub.drain() // one look for a burst of events
	}
}

// lockSwitch takes the switch's control-plane lock, or gives up when ctx
// ends. A plain Lock could deadlock: DelPort holds that lock while it
// closes the port, and closing waits for this goroutine.
func lockSwitch(ctx context.Context, sw *Switch) bool {
	for !sw.mu.TryLock() {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(time.Millisecond):
		}
	}
	if ctx.Err() != nil {
		sw.mu.Unlock()
		return false
	}
	return true
}

// linkSub is an rtnetlink subscription to link changes (of every
// interface: the kernel has no per-interface groups). A nil *linkSub is
// no subscription: it delivers nothing.
type linkSub struct {
	ch   chan netlink.LinkUpdate
	done chan struct{}
}

func subscribeLinks() (*linkSub, error) {
	s := &linkSub{ch: make(chan netlink.LinkUpdate, 64), done: make(chan struct{})}
	if err := netlink.LinkSubscribe(s.ch, s.done); err != nil {
		close(s.done)
		return nil, fmt.Errorf("vswitch: subscribe to link changes: %w", err)
	}
	return s, nil
}

func (s *linkSub) updates() <-chan netlink.LinkUpdate {
	if s == nil {
		return nil
	}
	return s.ch
}

// drain takes the updates already queued.
func (s *linkSub) drain() {
	for s != nil {
		select {
		case _, ok := <-s.ch:
			if !ok {
				return // the next receive finds it closed
			}
		default:
			return
		}
	}
}

// stop ends the subscription (once) and waits until the library's
// goroutine, which may be blocked sending, has closed the channel.
func (s *linkSub) stop() {
	if s == nil {
		return
	}
	close(s.done)
	for range s.ch {
	}
}
