package portspec

import (
	"fmt"
	"net"
	"strconv"
)

// Gen is a benchmark-only frame generator port (package framegen):
// `NAME,size=N,dst=MAC[,src=MAC]`.
type Gen struct {
	Name string `json:"name"`
	Size int    `json:"size"` // frame length, Ethernet header to end of payload (no FCS)
	Dst  string `json:"dst"`
	Src  string `json:"src,omitempty"` // default GenDefaultSrc
}

// GenMinFrame is an Ethernet + IPv4 + UDP header; GenMaxFrame is the
// largest frame a vhost or jumbo-frame NIC port takes.
const (
	GenMinFrame = 14 + 20 + 8
	GenMaxFrame = 9018
)

// GenDefaultSrc is the source MAC of generated frames unless src= says.
const GenDefaultSrc = "02:00:00:00:00:fe"

// ParseGen parses a --gen value.
func ParseGen(s string) (Gen, error) {
	head, opts, err := split(s)
	if err != nil {
		return Gen{}, err
	}
	g := Gen{Name: head, Size: 64, Src: GenDefaultSrc}
	for k, v := range opts {
		switch k {
		case "size":
			n, err := strconv.Atoi(v)
			if err != nil || n < GenMinFrame || n > GenMaxFrame {
				return Gen{}, fmt.Errorf("%w: size=%q: want a frame length, %d..%d", ErrBadSpec, v, GenMinFrame, GenMaxFrame)
			}
			g.Size = n
		case "dst", "src":
			hw, err := net.ParseMAC(v)
			if err != nil || len(hw) != 6 {
				return Gen{}, fmt.Errorf("%w: %s=%q: want an Ethernet address", ErrBadSpec, k, v)
			}
			if k == "dst" {
				g.Dst = hw.String()
			} else {
				g.Src = hw.String()
			}
		default:
			return Gen{}, fmt.Errorf("%w: unknown option %q: want size=N, dst=MAC or src=MAC", ErrBadSpec, k)
		}
	}
	if g.Dst == "" {
		return Gen{}, fmt.Errorf("%w: dst=MAC is required", ErrBadSpec)
	}
	return g, nil
}
