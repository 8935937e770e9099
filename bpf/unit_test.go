package bpf

import (
	"errors"
	"net"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
)

// Counters must mirror the C struct field for field (up to the case of
// initialisms), or sumCounters and the bpftool names drift apart from the
// Go names.
func TestCountersMirrorC(t *testing.T) {
	ct := reflect.TypeOf(steerXvsCounters{})
	gt := reflect.TypeOf(Counters{})
	var cNames []string
	for i := range ct.NumField() {
		if f := ct.Field(i); f.Name != "_" {
			cNames = append(cNames, f.Name)
		}
	}
	var gNames []string
	for i := range gt.NumField() {
		gNames = append(gNames, gt.Field(i).Name)
	}
	if !slices.EqualFunc(cNames, gNames, strings.EqualFold) {
		t.Fatalf("C struct xvs_counters fields %v, Go Counters fields %v", cNames, gNames)
	}
	// Every field is summed: give CPU i the value i+1 in field i.
	var perCPU []steerXvsCounters
	for i := range 3 {
		var v steerXvsCounters
		rv := reflect.ValueOf(&v).Elem()
		for f := 1; f < rv.NumField(); f++ {
			rv.Field(f).SetUint(uint64((i + 1) * f))
		}
		perCPU = append(perCPU, v)
	}
	sum := reflect.ValueOf(sumCounters(perCPU))
	for f := range sum.NumField() {
		if got, want := sum.Field(f).Uint(), uint64(6*(f+1)); got != want {
			t.Errorf("%s summed to %d, want %d", gt.Field(f).Name, got, want)
		}
	}
}

func TestCountersArithmetic(t *testing.T) {
	a := Counters{Redirected: 5, NoSocketPassed: 4, BadQueuePassed: 3, NotOwnedPassed: 2, ShortPassed: 1,
		HostARPPassed: 8, HostNDPassed: 9, SteeredBroadcast: 6, SteeredMulticast: 7, GroupPassed: 10}
	if a.Total() != 42 || a.Steered() != 12 || a.HostPassed() != 17 {
		t.Fatalf("Total %d Steered %d HostPassed %d, want 42 12 17", a.Total(), a.Steered(), a.HostPassed())
	}
	if d := a.Sub(a); d != (Counters{}) {
		t.Fatalf("a-a = %+v", d)
	}
	b := a
	b.SteeredMulticast += 2
	if d := b.Sub(a); d != (Counters{SteeredMulticast: 2}) {
		t.Fatalf("b-a = %+v", d)
	}
}

// The Go constants and names must match what steer.c declares.
func TestSpecMatchesConstants(t *testing.T) {
	spec, err := loadSteer()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]struct {
		typ ebpf.MapType
		max uint32
	}{
		steerMapXsks:        {ebpf.XSKMap, MaxQueues},
		steerMapMacs:        {ebpf.Hash, MaxMACs},
		steerMapConfig:      {ebpf.Array, 1},
		steerMapCounters:    {ebpf.PerCPUArray, 1},
		steerMapHostV4:      {ebpf.Hash, MaxHostAddrs},
		steerMapHostV6:      {ebpf.Hash, MaxHostAddrs},
		steerMapQueueOwners: {ebpf.Array, MaxQueues},
	}
	if len(spec.Maps) != len(want) {
		t.Errorf("spec has maps %v", spec.Maps)
	}
	for name, w := range want {
		m := spec.Maps[name]
		if m == nil {
			t.Errorf("no map %q", name)
			continue
		}
		if m.Type != w.typ || m.MaxEntries != w.max {
			t.Errorf("map %s: %s with %d entries, want %s with %d", name, m.Type, m.MaxEntries, w.typ, w.max)
		}
		if name != steerMapXsks && m.Value == nil {
			t.Errorf("map %s has no BTF value type (bpftool would print bytes)", name)
		}
	}
	p := spec.Programs[pinProg]
	if p == nil || p.Type != ebpf.XDP {
		t.Fatalf("program %q: %+v", pinProg, p)
	}
	// Kernel object names are cut at 15 bytes: ours must fit to stay stable.
	for name := range spec.Maps {
		if len(name) > 15 {
			t.Errorf("map name %q too long", name)
		}
	}
	if len(pinProg) > 15 {
		t.Errorf("program name %q too long", pinProg)
	}
}

func TestMACKey(t *testing.T) {
	good, _ := net.ParseMAC("02:11:22:33:44:55")
	k, err := macKey(good)
	if err != nil || k.Addr != [6]uint8{2, 0x11, 0x22, 0x33, 0x44, 0x55} || k.Vlan != 0 {
		t.Fatalf("macKey(%s) = %+v, %v", good, k, err)
	}
	if k, err := macVLANKey(good, 4094); err != nil || k.Vlan != 4094 {
		t.Fatalf("macVLANKey(%s, 4094) = %+v, %v", good, k, err)
	}
	if _, err := macVLANKey(good, 4095); !errors.Is(err, ErrMAC) {
		t.Errorf("macVLANKey(%s, 4095) = %v, want ErrMAC", good, err)
	}
	for _, s := range []string{"ff:ff:ff:ff:ff:ff", "01:00:5e:00:00:01", "33:33:00:00:00:01", "00:00:00:00:00:00"} {
		m, _ := net.ParseMAC(s)
		if _, err := macKey(m); !errors.Is(err, ErrMAC) {
			t.Errorf("macKey(%s) = %v, want ErrMAC", s, err)
		}
	}
	if _, err := macKey(net.HardwareAddr{2, 0, 0, 0, 0}); !errors.Is(err, ErrMAC) {
		t.Errorf("5-byte MAC: %v, want ErrMAC", err)
	}
	long, _ := net.ParseMAC("02:00:00:00:00:00:00:01")
	if _, err := macKey(long); !errors.Is(err, ErrMAC) {
		t.Errorf("8-byte MAC: %v, want ErrMAC", err)
	}
}

func TestPolicyC(t *testing.T) {
	for _, p := range []Policy{{}, {Mode: ModeAll}, {Mode: ModeMAC, Broadcast: true}, {Mode: ModeMAC, Multicast: true}, {Mode: ModeMAC, Broadcast: true, Multicast: true}} {
		if err := p.validate(); err != nil {
			t.Errorf("%v: %v", p, err)
		}
		if got := policyFromC(p.toC()); got != p {
			t.Errorf("round trip of %v gave %v", p, got)
		}
	}
	if err := (Policy{Mode: 3}).validate(); !errors.Is(err, ErrPolicy) {
		t.Errorf("mode 3: %v, want ErrPolicy", err)
	}
	if ModeMAC.String() != "mac" || ModeAll.String() != "all" || ModeNone.String() != "none" {
		t.Errorf("mode names: %s %s %s", ModeMAC, ModeAll, ModeNone)
	}
	if _, err := Attach("lo", Options{Policy: Policy{Mode: 9}}); !errors.Is(err, ErrPolicy) {
		t.Errorf("Attach with mode 9: %v, want ErrPolicy", err)
	}
}
