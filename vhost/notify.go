package vhost

import (
	"fmt"
	"time"

	"github.com/xvswitch/xvswitch/virtionet"
)

// notifyStallAfter is how long a write of a call or error eventfd may
// block before the device is broken for it. A write blocks only on an
// eventfd whose counter is at its maximum, which interrupts never reach:
// the front-end filled it and does not read it.
var notifyStallAfter = time.Second

// newNotifier starts the Notifier of session s: the goroutine that writes
// its call and error eventfds, so that no worker and not the control path
// ever waits on an eventfd the front-end chose. Only that session's
// interrupts can stall; a stall that lasts is the front-end's fault and
// breaks the session.
func (d *Device) newNotifier(s *session) (*virtionet.Notifier, error) {
	return virtionet.NewNotifier(virtionet.NotifierConfig{
		Lines:      2 * s.nq,
		StallAfter: notifyStallAfter,
		Stalled: func(line int) {
			kind := "call"
			if line >= s.nq {
				kind = "error"
			}
			d.breakSession(s.id, line%s.nq, fmt.Errorf("%w: the %s eventfd has blocked the device's write for %v: its counter is at the maximum and the front-end does not read it",
				ErrNotifyBlocked, kind, notifyStallAfter))
		},
	})
}

// notifierExit bounds how long a session's end waits for its Notifier to
// write what it owed and close its fds: microseconds, unless a write
// blocks and the front-end keeps refilling the eventfd the Notifier
// clears to free it.
const notifierExit = 100 * time.Millisecond

// awaitNotifier waits (without d.mu) for a closed Notifier to exit, so
// that a session's fds are closed when ServeConn returns. One still
// blocked after notifierExit is left to finish on its own.
func (d *Device) awaitNotifier(n *virtionet.Notifier) {
	select {
	case <-n.Done():
	case <-time.After(notifierExit):
		d.log.Warn("vhost: the notifier is still blocked writing an eventfd the front-end keeps full; it exits once the write goes through")
	}
}
