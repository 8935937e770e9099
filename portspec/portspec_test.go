package portspec

import (
	"errors"
	"reflect"
	"testing"
)

func TestParseNIC(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want NIC
		bad  bool
	}{
		{in: "eth0", want: NIC{Name: "eth0", Ifname: "eth0", Mode: ModeAuto}},
		{in: "eth0,queues=4,mode=copy,name=uplink", want: NIC{Name: "uplink", Ifname: "eth0", Queues: 4, Mode: ModeCopy}},
		{in: "eth0,maxmacs=4096", want: NIC{Name: "eth0", Ifname: "eth0", Mode: ModeAuto, MaxMACs: 4096}},
		{in: "eth0,csum=fix", want: NIC{Name: "eth0", Ifname: "eth0", Mode: ModeAuto, Csum: CsumFix}},
		{in: "eth0,csum=off", want: NIC{Name: "eth0", Ifname: "eth0", Mode: ModeAuto, Csum: CsumOff}},
		{in: "eth0,csum=auto", want: NIC{Name: "eth0", Ifname: "eth0", Mode: ModeAuto}},
		{in: "eth0,csum=maybe", bad: true},
		{in: "eth0,maxmacs=0", bad: true},
		{in: "eth0,maxmacs=4097", bad: true},
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
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%q: got %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
}

func TestParseVhost(t *testing.T) {
	got, err := ParseVhost("/run/vm1.sock,client,queues=2,mac=52:54:00:AA:00:01")
	want := Vhost{Name: "vm1", Path: "/run/vm1.sock", Client: true, Queues: 2, MAC: "52:54:00:aa:00:01"}
	if err != nil || !reflect.DeepEqual(got, want) {
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

// TestParseVhostPortSecurity: spoof= and maxmacs=. With mac= and no
// spoof=, source MACs are enforced (AllowSpoof false); the default limit
// is the switch's (MaxMACs 0).
func TestParseVhostPortSecurity(t *testing.T) {
	for _, tc := range []struct {
		in         string
		allowSpoof bool
		maxMACs    int
	}{
		{in: "/x.sock,mac=52:54:00:00:00:01"},
		{in: "/x.sock,mac=52:54:00:00:00:01,spoof=drop"},
		{in: "/x.sock,mac=52:54:00:00:00:01,spoof=allow", allowSpoof: true},
		{in: "/x.sock,spoof=allow,mac=52:54:00:00:00:01,maxmacs=8", allowSpoof: true, maxMACs: 8},
		{in: "/x.sock,maxmacs=1", maxMACs: 1},
		{in: "/x.sock,maxmacs=4096", maxMACs: 4096},
	} {
		got, err := ParseVhost(tc.in)
		if err != nil || got.AllowSpoof != tc.allowSpoof || got.MaxMACs != tc.maxMACs {
			t.Errorf("%q: got %+v, %v; want allow_spoof %v, maxmacs %d", tc.in, got, err, tc.allowSpoof, tc.maxMACs)
		}
	}
	for _, bad := range []string{
		"/x.sock,mac=52:54:00:00:00:01,spoof=yes",
		"/x.sock,mac=52:54:00:00:00:01,spoof",
		"/x.sock,spoof=allow", // nothing to check sources against
		"/x.sock,spoof=drop",
		"/x.sock,maxmacs=0",
		"/x.sock,maxmacs=-1",
		"/x.sock,maxmacs=4097",
		"/x.sock,maxmacs=many",
		"/x.sock,maxmacs=",
		"/x.sock,maxmacs=8,maxmacs=9",
	} {
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
	for _, bad := range []string{"3-1", "x", "-1", "1-"} {
		if _, err := ParseCPUList(bad); !errors.Is(err, ErrBadCPUList) {
			t.Errorf("%q: err %v, want ErrBadCPUList", bad, err)
		}
	}
}

func TestParseGen(t *testing.T) {
	g, err := ParseGen("g0,size=1518,dst=02:00:00:00:00:01")
	if err != nil {
		t.Fatal(err)
	}
	if g.Name != "g0" || g.Size != 1518 || g.Dst != "02:00:00:00:00:01" || g.Src != GenDefaultSrc {
		t.Fatalf("parsed %+v", g)
	}
	g, err = ParseGen("g1,dst=02:00:00:00:00:01,src=02:00:00:00:00:09")
	if err != nil || g.Size != 64 || g.Src != "02:00:00:00:00:09" {
		t.Fatalf("defaults: %+v %v", g, err)
	}
	for _, bad := range []string{"g", "g,size=41,dst=02:00:00:00:00:01", "g,size=9019,dst=02:00:00:00:00:01",
		"g,dst=zz", "g,dst=02:00:00:00:00:01,colour=red", ",dst=02:00:00:00:00:01"} {
		if _, err := ParseGen(bad); !errors.Is(err, ErrBadSpec) {
			t.Errorf("ParseGen(%q): err %v, want ErrBadSpec", bad, err)
		}
	}
}

// TestErrorsSayWhatIsAccepted: the caller names the argument (the CLI
// prints "--nic SPEC: ..."), so an error says what is wrong and what is
// accepted, without repeating the spec.
func TestErrorsSayWhatIsAccepted(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{second(ParseNIC("eth0,colour=red")), `bad port spec: unknown option "colour": want queues=N, mode=auto|copy|zerocopy, csum=auto|fix|off, maxmacs=N, vlan=N, trunk=N+M+... or name=NAME`},
		{second(ParseVhost("/run/vm.sock,trunk=10+x")), `bad port spec: trunk="x": want VLAN ids 1..4094`},
		{second(ParseNIC("averyveryverylongifname")), `bad port spec: interface name "averyveryverylongifname": longer than 15 characters`},
		{second(ParseVhost("/run/vm.sock,queues=x")), `bad port spec: queues="x": want 1..256`},
		{second(ParseVhost("/run/vm.sock,client=yes")), `bad port spec: client=yes: client takes no value`},
		{second(ParseGen("g0,size=10,dst=02:00:00:00:00:01")), `bad port spec: size="10": want a frame length, 42..9018`},
		{second(ParseXConnect("a")), `bad port spec: want NAME=NAME, naming two different ports`},
		{second(ParseCPUList("3-1")), `bad cpu list: want CPU numbers and ascending ranges, such as 2-3 or 0,2,4`},
		{second(ParseNIC("eth0,,mode=copy")), `bad port spec: an empty option (a stray comma?)`},
	} {
		if tc.err == nil || tc.err.Error() != tc.want {
			t.Errorf("error %v, want %s", tc.err, tc.want)
		}
	}
}

func second[T any](_ T, err error) error { return err }

// TestParseVhostOffloads: offloads=off turns a port's offloads off; on is
// the default.
func TestParseVhostOffloads(t *testing.T) {
	for in, want := range map[string]bool{"/x.sock": false, "/x.sock,offloads=on": false, "/x.sock,offloads=off": true} {
		v, err := ParseVhost(in)
		if err != nil || v.NoOffloads != want {
			t.Errorf("%s: %+v, %v", in, v, err)
		}
	}
	for _, in := range []string{"/x.sock,offloads", "/x.sock,offloads=no"} {
		if _, err := ParseVhost(in); err == nil {
			t.Errorf("%s: no error", in)
		}
	}
}
