package portspec

import (
	"errors"
	"reflect"
	"testing"
)

func TestParseOwn(t *testing.T) {
	v, err := ParseVhost("/run/vm1.sock,mac=52:54:00:00:00:01,own=eth1:2+1")
	if err != nil {
		t.Fatal(err)
	}
	want := &Own{Ifname: "eth1", Queues: []int{1, 2}}
	if !reflect.DeepEqual(v.Own, want) {
		t.Fatalf("own: %+v, want %+v", v.Own, want)
	}
	if s := v.Own.String(); s != "eth1:1+2" {
		t.Errorf("String: %q", s)
	}
	if !v.Own.Owns("eth1", 2) || v.Own.Owns("eth1", 0) || v.Own.Owns("eth2", 1) {
		t.Errorf("Owns is wrong for %+v", v.Own)
	}
	if v, err := ParseVhost("/run/vm1.sock"); err != nil || v.Own != nil {
		t.Errorf("no own=: %+v %v", v.Own, err)
	}
	for _, tc := range []struct{ in, want string }{
		{"/x.sock,mac=52:54:00:00:00:01,own=eth1", `bad port spec: own="eth1": want IFNAME:Q[+Q...], e.g. own=eth1:1+2`},
		{"/x.sock,mac=52:54:00:00:00:01,own=:1", `bad port spec: own=":1": want IFNAME:Q[+Q...], e.g. own=eth1:1+2`},
		{"/x.sock,mac=52:54:00:00:00:01,own=eth1:", `bad port spec: own="eth1:": want IFNAME:Q[+Q...], e.g. own=eth1:1+2`},
		{"/x.sock,mac=52:54:00:00:00:01,own=eth1:1+x", `bad port spec: own="eth1:1+x": queue "x": want 0..255`},
		{"/x.sock,mac=52:54:00:00:00:01,own=eth1:256", `bad port spec: own="eth1:256": queue "256": want 0..255`},
		{"/x.sock,mac=52:54:00:00:00:01,own=eth1:1+1", `bad port spec: own="eth1:1+1": queue 1 given twice`},
		{"/x.sock,mac=52:54:00:00:00:01,own=averyveryverylongifname:1", `bad port spec: own="averyveryverylongifname:1": interface name longer than 15 characters`},
		{"/x.sock,own=eth1:1", `bad port spec: --vhost "/x.sock,own=eth1:1": own= needs mac=`},
	} {
		_, err := ParseVhost(tc.in)
		if !errors.Is(err, ErrBadSpec) || err.Error() != tc.want {
			t.Errorf("%q: %v, want %s", tc.in, err, tc.want)
		}
	}
}
