package qemu

import (
	"testing"

	"github.com/xvswitch/xvswitch/test/require"
)

// TestQEMUReference runs the reference topology (reference.go) with
// both ring kinds: a guest's two NICs on DPDK's vhost-user back-end, a
// ping and a TCP stream from eth0 to eth1 (in its own namespace) across
// it, and RING_PACKED negotiated exactly with packed=on.
func TestQEMUReference(t *testing.T) {
	require.Long(t)
	for _, tc := range []struct {
		name   string
		packed bool
	}{{"packed", true}, {"split", false}} {
		t.Run(tc.name, func(t *testing.T) {
			r := RunReference(t, tc.packed)
			CheckReference(t, r, tc.packed)
		})
	}
}
