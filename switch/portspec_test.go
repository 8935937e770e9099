package vswitch

import (
	"errors"
	"reflect"
	"testing"
)

func TestParseNIC(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want NICSpec
		bad  bool
	}{
		{in: "eth0", want: NICSpec{Name: "eth0", Ifname: "eth0", Mode: ModeAuto}},
		{in: "eth0,queues=4,mode=copy,name=uplink", want: NICSpec{Name: "uplink", Ifname: "eth0", Queues: 4, Mode: ModeCopy}},
		{in: "eth0,mode=fast", bad: true},
		{in: "eth0,queues=0", bad: true},
		{in: "eth0,color=red", bad: true},
		{in: ",queues=1", bad: true},
		{in: "averyveryverylongifname", bad: true},
	} {
		got, err := ParseNIC(tc.in)
		if tc.bad {
			if !errors.Is(err, ErrBadSpec) {
				t.Errorf("%q: err %v, want ErrBadSpec", tc.in, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%q: got %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
}

func TestParseVhost(t *testing.T) {
	got, err := ParseVhost("/run/vm1.sock,client,queues=2,mac=52:54:00:AA:00:01")
	want := VhostSpec{Name: "vm1", Path: "/run/vm1.sock", Client: true, Queues: 2, MAC: "52:54:00:aa:00:01"}
	if err != nil || got != want {
		t.Fatalf("got %+v, %v; want %+v", got, err, want)
	}
	got, err = ParseVhost("/run/vm2.sock,mode=0600,group=0")
	if err != nil || got.Mode != 0o600 || got.GID != 0 {
		t.Fatalf("mode/group: %+v %v", got, err)
	}
	if got, err = ParseVhost("/run/vm2.sock,group=root"); err != nil || got.GID != 0 {
		t.Fatalf("group by name: %+v %v", got, err)
	}
	for _, bad := range []string{"/x.sock,mac=01:00:5e:00:00:01", "/x.sock,client=yes", "/x.sock,queues=x", "/x.sock,name=", "/x.sock,mode=999", "/x.sock,group=no-such-group-xvs"} {
		if _, err := ParseVhost(bad); !errors.Is(err, ErrBadSpec) {
			t.Errorf("%q: err %v, want ErrBadSpec", bad, err)
		}
	}
}

func TestParseXConnectAndCPUs(t *testing.T) {
	if x, err := ParseXConnect("nic0=vm1"); err != nil || x != (XConnect{"nic0", "vm1"}) {
		t.Fatalf("got %+v %v", x, err)
	}
	for _, bad := range []string{"a", "a=a", "=b"} {
		if _, err := ParseXConnect(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	c, err := ParseCPUList("0,2-4")
	if err != nil || !reflect.DeepEqual(c, []int{0, 2, 3, 4}) {
		t.Fatalf("got %v %v", c, err)
	}
	if _, err := ParseCPUList("3-1"); err == nil {
		t.Fatal("3-1 accepted")
	}
}
