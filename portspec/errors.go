package portspec

import "errors"

// ErrBadSpec means a port or cross-connect specification does not parse.
var ErrBadSpec = errors.New("bad port spec")

// ErrBadCPUList means a CPU list does not parse.
var ErrBadCPUList = errors.New("bad cpu list")
