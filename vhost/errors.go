package vhost

import "errors"

var (
	// ErrSocketInUse means the socket path already has a live listener:
	// another process (or another device) serves it.
	ErrSocketInUse = errors.New("vhost: socket path has a live listener")
	// ErrNotSocket means the path exists and is not a Unix socket, so it
	// is not ours to replace.
	ErrNotSocket = errors.New("vhost: path exists and is not a socket")
	// ErrClosed is returned by operations on a closed Device.
	ErrClosed = errors.New("vhost: device closed")
	// ErrBusy means the device already serves a connection.
	ErrBusy = errors.New("vhost: device already has a front-end connection")

	// Protocol errors: the front-end broke the vhost-user protocol. The
	// device is marked broken and the connection closed.
	ErrBadMessage  = errors.New("vhost: malformed message")
	ErrOversize    = errors.New("vhost: message payload too large")
	ErrBadVersion  = errors.New("vhost: unsupported protocol version")
	ErrBadFDs      = errors.New("vhost: wrong file descriptors for the message")
	ErrBadQueue    = errors.New("vhost: queue index out of range")
	ErrBadFeatures = errors.New("vhost: front-end set features the device does not offer")
	ErrBadMemTable = errors.New("vhost: unusable memory table")
	// ErrBadLog: SET_LOG_BASE gave a dirty log the device cannot map
	// safely (no fd, a size or offset out of bounds, a file too short).
	ErrBadLog = errors.New("vhost: unusable dirty log")
	// ErrFeaturesChanged: SET_FEATURES changed what started rings cannot
	// change (the ring kind).
	ErrFeaturesChanged = errors.New("vhost: features changed under started rings")
	ErrUnknown         = errors.New("vhost: unknown or unsupported request")
	// ErrNotifyBlocked: a call or error eventfd the front-end handed
	// over blocks the device's writes (its counter is full).
	ErrNotifyBlocked = errors.New("vhost: notification eventfd blocked")

	// ErrRejected means a well-formed request asked for something the
	// device refuses (an MTU out of range, a config write); the front-end
	// gets an error reply and the connection stays up.
	ErrRejected = errors.New("vhost: request rejected")
)
