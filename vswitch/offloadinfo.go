package vswitch

import (
	"strings"

	"github.com/xvswitch/xvswitch/virtionet"
)

// offloadsDetail says in `show ports` what a guest negotiated: tx= what
// it may leave to the switch on what it sends, rx= what it takes on what
// it receives, e.g. "offloads=tx:csum+tso4+tso6,rx:csum+tso4+tso6", or
// "offloads=none".
func offloadsDetail(features uint64) string {
	o := virtionet.OffloadsOf(features)
	list := func(csum, tso4, tso6 bool) string {
		var p []string
		for _, x := range []struct {
			on   bool
			name string
		}{{csum, "csum"}, {tso4, "tso4"}, {tso6, "tso6"}} {
			if x.on {
				p = append(p, x.name)
			}
		}
		return strings.Join(p, "+")
	}
	tx, rx := list(o.Csum, o.TSO4, o.TSO6), list(o.GuestCsum, o.GuestTSO4, o.GuestTSO6)
	switch {
	case tx == "" && rx == "":
		return "offloads=none"
	case tx == "":
		tx = "none"
	case rx == "":
		rx = "none"
	}
	return "offloads=tx:" + tx + ",rx:" + rx
}
