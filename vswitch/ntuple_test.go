package vswitch

import (
	"errors"
	"strings"
	"testing"

	"github.com/xvswitch/xvswitch/test/netns"
	"github.com/xvswitch/xvswitch/test/require"
)

// A veth has no ntuple filters: installing a MAC rule fails with
// ErrNoNtuple and a message that says what to do instead. (No NIC with
// ntuple filters is available here to test the success path.)
func TestMACRuleRefusedOnVeth(t *testing.T) {
	require.Root(t)
	v := netns.NewVeth(t, netns.VethOptions{Queues: 2})
	_, err := addMACRule(v.Outer, macBytes(ownedVM), 1)
	if !errors.Is(err, ErrNoNtuple) {
		t.Fatalf("addMACRule on a veth: %v, want ErrNoNtuple", err)
	}
	for _, want := range []string{v.Outer, "ETHTOOL_SRXCLSRLINS", "52:54:00:00:93:01", "action 1", "tc program"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if err := delMACRule(v.Outer, 0); err == nil {
		t.Error("delMACRule on a veth succeeded")
	}
}
