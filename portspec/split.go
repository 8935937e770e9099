package portspec

import (
	"fmt"
	"strconv"
	"strings"
)

// split splits "head,k=v,flag" into head and options; an option given
// twice is an error, so a spec never means two things.
func split(s string) (string, map[string]string, error) {
	parts := strings.Split(s, ",")
	if parts[0] == "" {
		return "", nil, fmt.Errorf("%w: the first field (interface, socket path or name) is empty", ErrBadSpec)
	}
	opts := map[string]string{}
	for _, p := range parts[1:] {
		k, v, _ := strings.Cut(p, "=")
		if k == "" {
			return "", nil, fmt.Errorf("%w: an empty option (a stray comma?)", ErrBadSpec)
		}
		if _, dup := opts[k]; dup {
			return "", nil, fmt.Errorf("%w: %s given twice", ErrBadSpec, k)
		}
		opts[k] = v
	}
	return parts[0], opts, nil
}

// positive parses a queue count.
func positive(s, what string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > 256 {
		return 0, fmt.Errorf("%w: %s=%q: want 1..256", ErrBadSpec, what, s)
	}
	return n, nil
}
