package vhost

import (
	"fmt"
	"net"
)

// EventKind says what happened to a device. Events are control-path
// notifications (a handful per connection), never per frame.
type EventKind uint8

const (
	// EventConnected: a front-end connected; negotiation starts.
	EventConnected EventKind = iota + 1
	// EventReady: queue pair 0 has both rings running (memory mapped,
	// rings set up, kicked and enabled): traffic can flow. Other queue
	// pairs come and go without events; a poller sees them through
	// Queue.Begin.
	EventReady
	// EventStopped: the device is no longer ready (a ring was stopped or
	// disabled, the front-end reset it, or the connection ended).
	EventStopped
	// EventRARP: the front-end asked (SEND_RARP, after a live migration)
	// for a RARP announcing MAC to be sent to the network; RARPFrame
	// builds it.
	EventRARP
	// EventBroken: the front-end or its guest broke the protocol or a
	// ring; Err says how. The connection is closed right after.
	EventBroken
	// EventGone: the connection ended (Err says why, nil for a clean
	// close by the front-end). A server-mode device accepts the next
	// connection; a client-mode device reconnects; a closed device stops.
	EventGone
)

var eventNames = [...]string{
	EventConnected: "connected", EventReady: "ready", EventStopped: "stopped",
	EventRARP: "rarp", EventBroken: "broken", EventGone: "gone",
}

func (k EventKind) String() string {
	if int(k) < len(eventNames) && eventNames[k] != "" {
		return eventNames[k]
	}
	return fmt.Sprintf("event(%d)", uint8(k))
}

// Event is one lifecycle change of a Device.
type Event struct {
	Device *Device
	Kind   EventKind
	Err    error            // EventBroken, EventGone
	MAC    net.HardwareAddr // EventRARP
	// quiet: the event needs no log line of its own, the one before or
	// after it says it (a disconnect's Stopped, a broken session's Gone).
	quiet bool
	// session numbers a device's connections, from 1 (EventConnected):
	// a later one is a reconnection.
	session uint64
}

func (e Event) String() string {
	s := e.Device.Name() + ": " + e.Kind.String()
	if e.MAC != nil {
		s += " " + e.MAC.String()
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}
