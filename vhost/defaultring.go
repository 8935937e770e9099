package vhost

import (
	"github.com/xvswitch/xvswitch/packed"
	"github.com/xvswitch/xvswitch/split"
	"github.com/xvswitch/xvswitch/virtq"
)

// defaultRing builds the ring kind the front-end negotiated.
func defaultRing(isPacked bool, cfg virtq.Config) (virtq.Ring, error) {
	if isPacked {
		return packed.New(cfg)
	}
	return split.New(cfg)
}
