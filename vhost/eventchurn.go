package vhost

import (
	"log/slog"
	"sync"
	"time"
)

// A front-end that connects and fails the same way again and again (QEMU
// with reconnect= asking for more queue pairs than the port has, a
// misconfigured client retrying at once) would write its connected and
// broken lines hundreds of times a second. After churnFree sessions in a
// row that ended with the same error, each less than churnWindow after the
// one before, the lines of further such sessions are held back and one
// summary line says how many there were, at most every churnWindow and
// once more when the run ends. A session that reaches ready, ends another
// way, or comes after a pause is logged in full again.
const (
	churnFree   = 3
	churnWindow = 10 * time.Second
)

// eventChurn is a device's record of how its recent sessions ended.
type eventChurn struct {
	mu      sync.Mutex
	err     string    // how the last session ended ("" cleanly)
	endedAt time.Time // when
	repeats int       // sessions in a row that ended with err
	// held counts the sessions whose lines were held back since the last
	// summary; heldConn is the current session's held "connected" line.
	held     int
	heldConn *Event
	timer    *time.Timer
}

// connected reports whether e, a session's EventConnected, is logged now;
// if not, it is held until the session's fate is known.
func (c *eventChurn) connected(e Event) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.repeats < churnFree || time.Since(c.endedAt) > churnWindow {
		return true
	}
	c.heldConn = &e
	return false
}

// ready returns the held connected line of a session that got as far as
// ready (nil if none was held): the front-end works now, the run is over.
func (c *eventChurn) ready(log *slog.Logger) *Event {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.heldConn
	c.flushLocked(log)
	c.err, c.repeats, c.heldConn = "", 0, nil
	return e
}

// ended records how a session ended (err "" cleanly) and reports whether
// its line is logged.
func (c *eventChurn) ended(log *slog.Logger, err string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	same := err != "" && err == c.err && now.Sub(c.endedAt) <= churnWindow
	hc := c.heldConn
	c.heldConn = nil
	c.endedAt = now
	if !same {
		c.flushLocked(log)
		c.err, c.repeats = err, 1
		if hc != nil {
			// Its connected line was held on the strength of the run
			// before; log the session in full after all.
			log.Info("vhost front-end reconnected", "connection", hc.session)
		}
		return true
	}
	c.repeats++
	if hc == nil {
		return true
	}
	c.held++
	if c.timer == nil {
		c.timer = time.AfterFunc(churnWindow, func() { c.flush(log) })
	}
	return false
}

func (c *eventChurn) flush(log *slog.Logger) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.flushLocked(log)
}

// flushLocked logs the summary of held sessions, if any.
func (c *eventChurn) flushLocked(log *slog.Logger) {
	if c.timer != nil {
		c.timer.Stop()
		c.timer = nil
	}
	if c.held == 0 {
		return
	}
	log.Warn("vhost front-end keeps reconnecting and failing the same way; its sessions' lines were held back",
		"sessions", c.held, "err", c.err)
	c.held = 0
}
