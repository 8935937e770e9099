package portspec

import (
	"fmt"
	"strings"
)

// XConnect joins two ports: everything one receives goes out of the other.
type XConnect struct {
	A string `json:"a"`
	B string `json:"b"`
}

// ParseXConnect parses a --xconnect value, NAME=NAME.
func ParseXConnect(s string) (XConnect, error) {
	a, b, ok := strings.Cut(s, "=")
	if !ok || a == "" || b == "" || a == b {
		return XConnect{}, fmt.Errorf("%w: want NAME=NAME, naming two different ports", ErrBadSpec)
	}
	return XConnect{A: a, B: b}, nil
}
