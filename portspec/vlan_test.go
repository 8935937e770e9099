package portspec

import (
	"errors"
	"reflect"
	"testing"
)

func TestParseVLANs(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want VLANs
		bad  bool
	}{
		{in: "eth0", want: VLANs{}},
		{in: "eth0,vlan=10", want: VLANs{Tag: 10}},
		{in: "eth0,trunk=30+10+20", want: VLANs{Trunks: []int{10, 20, 30}}},
		{in: "eth0,trunk=10+20,vlan=5", want: VLANs{Tag: 5, Trunks: []int{10, 20}}},
		{in: "eth0,trunk=4094", want: VLANs{Trunks: []int{4094}}},
		{in: "eth0,vlan=0", bad: true},
		{in: "eth0,vlan=4095", bad: true},
		{in: "eth0,vlan=ten", bad: true},
		{in: "eth0,trunk=", bad: true},
		{in: "eth0,trunk=10+", bad: true},
		{in: "eth0,trunk=10+10", bad: true},
		{in: "eth0,trunk=10,20", bad: true}, // "20" is an option, not a VLAN
		{in: "eth0,vlan=1,vlan=2", bad: true},
	} {
		n, err := ParseNIC(tc.in)
		v, verr := ParseVhost("/tmp/" + tc.in)
		if tc.bad {
			if !errors.Is(err, ErrBadSpec) || !errors.Is(verr, ErrBadSpec) {
				t.Errorf("%q: errs %v, %v; want ErrBadSpec", tc.in, err, verr)
			}
			continue
		}
		if err != nil || verr != nil {
			t.Fatalf("%q: %v, %v", tc.in, err, verr)
		}
		if !reflect.DeepEqual(n.VLANs, tc.want) || !reflect.DeepEqual(v.VLANs, tc.want) {
			t.Errorf("%q: nic %+v, vhost %+v; want %+v", tc.in, n.VLANs, v.VLANs, tc.want)
		}
		if got, _ := ParseNIC("eth0," + n.VLANs.String()); tc.want.IsSet() && !reflect.DeepEqual(got.VLANs, tc.want) {
			t.Errorf("%q: String %q parses back as %+v", tc.in, n.VLANs.String(), got.VLANs)
		}
	}
	if _, err := ParseVhost("/tmp/a.sock,mac=52:54:00:00:00:01,own=eth0:1,vlan=10"); !errors.Is(err, ErrBadSpec) {
		t.Errorf("own= with vlan=: err %v, want ErrBadSpec", err)
	}
}
