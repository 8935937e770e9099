package portspec

import (
	"fmt"
	"strconv"
)

// FDBSize is how many MACs the switch's forwarding database holds, shared
// by all ports; vswitch sizes its table with it. A port's maxmacs= is at
// most this: a larger limit would never be reached.
const FDBSize = 4096

// maxMACs parses a maxmacs= value: how many learned MACs one port may hold
// in the FDB at once.
func maxMACs(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > FDBSize {
		return 0, fmt.Errorf("%w: maxmacs=%q: want 1..%d", ErrBadSpec, s, FDBSize)
	}
	return n, nil
}

// allowSpoof parses a spoof= value: "allow" lets a port with mac= send
// from other source MACs too, "drop" (the default) drops such frames.
func allowSpoof(s string) (bool, error) {
	switch s {
	case "allow":
		return true, nil
	case "drop":
		return false, nil
	}
	return false, fmt.Errorf("%w: spoof=%q: want allow or drop", ErrBadSpec, s)
}
