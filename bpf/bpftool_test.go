package bpf

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/xvswitch/xvswitch/test/netns"
	"github.com/xvswitch/xvswitch/test/require"
)

// counterFields are the C names bpftool prints, in Go field order.
var counterFields = []string{
	"redirected", "no_socket_passed", "bad_queue_passed", "not_owned_passed",
	"short_passed", "host_arp_passed", "host_nd_passed", "steered_broadcast", "steered_multicast", "group_passed",
	"owned_queue_passed",
}

// bpftoolCounters sums what `bpftool -j map dump pinned` shows per CPU.
func bpftoolCounters(t *testing.T, path string) (Counters, int) {
	t.Helper()
	out := netns.MustRun(t, "bpftool", "-j", "map", "dump", "pinned", path)
	var dump []struct {
		Formatted struct {
			Key    uint32 `json:"key"`
			Values []struct {
				CPU   int               `json:"cpu"`
				Value map[string]uint64 `json:"value"`
			} `json:"values"`
		} `json:"formatted"`
	}
	if err := json.Unmarshal([]byte(out), &dump); err != nil || len(dump) != 1 {
		t.Fatalf("bpftool -j map dump pinned %s: %v\n%s", path, err, out)
	}
	var sum Counters
	sv := reflect.ValueOf(&sum).Elem()
	for _, v := range dump[0].Formatted.Values {
		if len(v.Value) != len(counterFields) {
			t.Fatalf("cpu %d: fields %v, want %v", v.CPU, v.Value, counterFields)
		}
		for i, name := range counterFields {
			n, ok := v.Value[name]
			if !ok {
				t.Fatalf("cpu %d: no field %q in %v", v.CPU, name, v.Value)
			}
			sv.Field(i).SetUint(sv.Field(i).Uint() + n)
		}
	}
	return sum, len(dump[0].Formatted.Values)
}

// bpftool shows the pinned maps with their field names, and the counters it
// shows are the ones the Go side reads.
func TestBpftoolDump(t *testing.T) {
	t.Parallel()
	require.Commands(t, "bpftool", "ping")
	l := newLab(t, Policy{Mode: ModeMAC, Multicast: true})
	vm := randomVMMAC()
	if err := l.S.AddMAC(vm, 42); err != nil {
		t.Fatal(err)
	}
	l.ping(t, l.OuterIP, 2)
	l.neigh(t, l.OuterIP, l.OuterMAC)
	l.neigh(t, l.VMIP, vm.String())
	l.udp(t, l.VMIP+":9", 3)
	l.udp(t, "239.1.2.3:9", 2)
	l.waitDelta(t, Counters{}, Counters{NotOwnedPassed: 3, NoSocketPassed: 5, SteeredMulticast: 2})

	path := filepath.Join(l.S.PinDir(), "counters")
	// The wire is quiet now, but read Go, bpftool, Go and retry if a stray
	// frame landed in between.
	for try := 0; ; try++ {
		before := l.counters(t)
		fromTool, cpus := bpftoolCounters(t, path)
		after := l.counters(t)
		if before != after && try < 5 {
			continue
		}
		if fromTool != before || fromTool != after {
			t.Fatalf("bpftool sums %+v, Go reads %+v", fromTool, before)
		}
		if cpus < 1 || fromTool.NoSocketPassed != 5 || fromTool.SteeredMulticast != 2 {
			t.Fatalf("bpftool (%d CPUs): %+v", cpus, fromTool)
		}
		break
	}

	// The plain dump names every field too.
	plain := netns.MustRun(t, "bpftool", "map", "dump", "pinned", path)
	for _, f := range counterFields {
		if !strings.Contains(plain, `"`+f+`"`) {
			t.Errorf("plain counters dump lacks %q:\n%s", f, plain)
		}
	}
	// The policy prints its mode by name, the MAC map its key bytes and port.
	cfg := netns.MustRun(t, "bpftool", "map", "dump", "pinned", filepath.Join(l.S.PinDir(), "config"))
	for _, s := range []string{`"mode": "XVS_MODE_MAC"`, `"broadcast": 0`, `"multicast": 1`} {
		if !strings.Contains(cfg, s) {
			t.Errorf("config dump lacks %s:\n%s", s, cfg)
		}
	}
	var macs []struct {
		Key struct {
			Addr []uint8 `json:"addr"`
		} `json:"key"`
		Value struct {
			Port uint32 `json:"port"`
		} `json:"value"`
	}
	out := netns.MustRun(t, "bpftool", "map", "dump", "pinned", filepath.Join(l.S.PinDir(), "macs"))
	if err := json.Unmarshal([]byte(out), &macs); err != nil || len(macs) != 1 {
		t.Fatalf("macs dump: %v\n%s", err, out)
	}
	if string(macs[0].Key.Addr) != string(vm) || macs[0].Value.Port != 42 {
		t.Errorf("macs dump: %+v, want %s port 42", macs[0], vm)
	}
	// Program and link by name.
	prog := netns.MustRun(t, "bpftool", "prog", "show", "pinned", filepath.Join(l.S.PinDir(), "xvs_steer"))
	if !strings.Contains(prog, "xdp") || !strings.Contains(prog, "name xvs_steer") {
		t.Errorf("prog show:\n%s", prog)
	}
	lk := netns.MustRun(t, "bpftool", "link", "show", "pinned", filepath.Join(l.S.PinDir(), "link"))
	if !strings.Contains(lk, "xdp") || !strings.Contains(lk, fmt.Sprintf("prog %d", progID(t, l.S))) {
		t.Errorf("link show:\n%s", lk)
	}
}
