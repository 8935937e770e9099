package vswitch

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/xvswitch/xvswitch/portspec"
	"github.com/xvswitch/xvswitch/virtionet"
)

// tagged is frame with an 802.1Q tag of vid after its MACs.
func tagged(vid uint16, frame []byte) []byte {
	out := append([]byte(nil), frame[:12]...)
	out = binary.BigEndian.AppendUint16(out, tpid8021Q)
	out = binary.BigEndian.AppendUint16(out, vid)
	return append(out, frame[12:]...)
}

// vlanPorts is a switch of fake ports with VLAN settings: access ports
// a10 and b10 in VLAN 10, a20 and b20 in VLAN 20, a trunk tr of 10 and 20,
// and a port un without settings.
type vlanPorts struct {
	s                          *Switch
	a10, b10, a20, b20, tr, un *fakePort
}

func newVLANPorts(t *testing.T) *vlanPorts {
	t.Helper()
	s := startTestSwitch(t, Config{Workers: 1})
	v := &vlanPorts{s: s}
	for _, p := range []struct {
		name  string
		f     **fakePort
		vlans portspec.VLANs
	}{
		{"a10", &v.a10, portspec.VLANs{Tag: 10}},
		{"b10", &v.b10, portspec.VLANs{Tag: 10}},
		{"a20", &v.a20, portspec.VLANs{Tag: 20}},
		{"b20", &v.b20, portspec.VLANs{Tag: 20}},
		{"tr", &v.tr, portspec.VLANs{Trunks: []int{10, 20}}},
		{"un", &v.un, portspec.VLANs{}},
	} {
		*p.f = newFakePort()
		if _, err := s.addSecuredPort(p.name, *p.f, security{maxMACs: DefaultMaxMACs, vlans: p.vlans}); err != nil {
			t.Fatal(err)
		}
	}
	return v
}

// got waits for n frames at f and returns them.
func got(t *testing.T, f *fakePort, n int) [][]byte {
	t.Helper()
	waitFor(t, "frames", func() bool { return len(f.frames()) >= n })
	return f.frames()
}

func wantFrames(t *testing.T, at string, got [][]byte, want ...[]byte) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d frames, want %d:\n%q", at, len(got), len(want), got)
	}
	for i := range want {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("%s frame %d:\n%x\nwant\n%x", at, i, got[i], want[i])
		}
	}
}

// TestVLANIsolationAndTags: two VLANs on one switch never see each
// other's broadcast, unknown unicast or unicast; the trunk carries both,
// each with its tag, and its tagged frames reach the access ports
// untagged; the port without settings gets VLAN 10 and 20 tagged (it
// carries every VLAN) and its own untagged frames reach no access port.
func TestVLANIsolationAndTags(t *testing.T) {
	v := newVLANPorts(t)
	const m10a, m10b, m20a, m20b, mTr = 0x0200_0000_0a01, 0x0200_0000_0a02, 0x0200_0000_1401, 0x0200_0000_1402, 0x0200_0000_0099
	// Broadcast in VLAN 10 from a10: b10 untagged, tr and un tagged 10.
	b10 := ethFrame(bcast, m10a, "bcast in 10")
	v.a10.put(b10)
	wantFrames(t, "b10", got(t, v.b10, 1), b10)
	wantFrames(t, "tr", got(t, v.tr, 1), tagged(10, b10))
	wantFrames(t, "un", got(t, v.un, 1), tagged(10, b10))
	// Unknown unicast in VLAN 20 from a20: only VLAN 20's ports.
	u20 := ethFrame(m20b, m20a, "unknown unicast in 20")
	v.a20.put(u20)
	wantFrames(t, "b20", got(t, v.b20, 1), u20)
	wantFrames(t, "tr", got(t, v.tr, 2), tagged(10, b10), tagged(20, u20))
	// Learned unicast: b10 answers a10 (learned in 10), b20 answers a20.
	r10 := ethFrame(m10a, m10b, "unicast in 10")
	r20 := ethFrame(m20a, m20b, "unicast in 20")
	v.b10.put(r10)
	v.b20.put(r20)
	wantFrames(t, "a10", got(t, v.a10, 1), r10)
	wantFrames(t, "a20", got(t, v.a20, 1), r20)
	// The trunk's tagged frames: VLAN 20 unicast to a20 arrives popped;
	// a frame to a10's MAC tagged 20 is not a10's (a10's MAC is known in
	// 10 only): it floods VLAN 20, reaching neither a10 nor b10.
	t20 := ethFrame(m20a, mTr, "from the trunk, 20")
	v.tr.put(tagged(20, t20))
	wrong := ethFrame(m10a, mTr, "a10's MAC, wrong VLAN")
	v.tr.put(tagged(20, wrong))
	wantFrames(t, "a20", got(t, v.a20, 3), r20, t20, wrong)
	wantFrames(t, "b20", got(t, v.b20, 2), u20, wrong)
	// The untagged frames of the port without settings are VLAN 0: no
	// access port and not the trunk.
	v.un.put(ethFrame(bcast, 0x0200_0000_0077, "untagged, vlan 0"))
	// Drops by reason: tagged on an access port, a VLAN outside the
	// trunk, untagged on a trunk without a native VLAN.
	v.a10.put(tagged(10, ethFrame(bcast, m10a, "tagged on access")))
	v.tr.put(tagged(30, ethFrame(bcast, mTr, "vlan 30")))
	v.tr.put(ethFrame(bcast, mTr, "untagged on trunk"))
	waitFor(t, "drops", func() bool {
		return portStats(v.s, "a10").Drops["vlan_tagged_on_access"] == 1 &&
			portStats(v.s, "tr").Drops["vlan_not_in_trunk"] == 1 &&
			portStats(v.s, "tr").Drops["vlan_untagged_on_trunk"] == 1 &&
			portStats(v.s, "un").Drops["no_destination"] == 1
	})
	balance(t, v.s)
	for name, f := range map[string]*fakePort{"a10": v.a10, "b10": v.b10, "a20": v.a20, "b20": v.b20} {
		for _, fr := range f.frames() {
			if binary.BigEndian.Uint16(fr[12:14]) == tpid8021Q {
				t.Errorf("%s got a tagged frame %x", name, fr)
			}
		}
	}
	if n := len(v.a10.frames()) + len(v.b10.frames()); n != 2 {
		t.Errorf("VLAN 10's access ports got %d frames, want 2", n)
	}
	// show fdb: the MACs in their VLANs.
	inVLAN := map[string]int{}
	for _, r := range v.s.FDB() {
		inVLAN[r.MAC+"@"+r.Port] = r.VLAN
	}
	for k, want := range map[string]int{"02:00:00:00:0a:01@a10": 10, "02:00:00:00:14:02@b20": 20, "02:00:00:00:00:99@tr": 20} {
		if got, ok := inVLAN[k]; !ok || got != want {
			t.Errorf("fdb %s: vlan %d (present %v), want %d; %v", k, got, ok, want, inVLAN)
		}
	}
}

// TestVLANNative: a trunk's native VLAN leaves it untagged, its other
// VLANs tagged, and its untagged frames are in the native VLAN.
func TestVLANNative(t *testing.T) {
	s := startTestSwitch(t, Config{Workers: 1})
	acc, tr, other := newFakePort(), newFakePort(), newFakePort()
	s.addSecuredPort("acc", acc, security{maxMACs: 8, vlans: portspec.VLANs{Tag: 5}})
	s.addSecuredPort("tr", tr, security{maxMACs: 8, vlans: portspec.VLANs{Tag: 5, Trunks: []int{7}}})
	s.addSecuredPort("other", other, security{maxMACs: 8, vlans: portspec.VLANs{Trunks: []int{5, 7}}})
	f := ethFrame(bcast, 0x0200_0000_0005, "native vlan 5, from the access port")
	acc.put(f)
	wantFrames(t, "tr (native 5)", got(t, tr, 1), f)
	wantFrames(t, "other (5 tagged)", got(t, other, 1), tagged(5, f))
	g := ethFrame(bcast, 0x0200_0000_0007, "vlan 7 from the trunk")
	tr.put(tagged(7, g))
	u := ethFrame(bcast, 0x0200_0000_0007, "untagged from the trunk: native 5")
	tr.put(u)
	wantFrames(t, "other", got(t, other, 3), tagged(5, f), tagged(7, g), tagged(5, u))
	wantFrames(t, "acc", got(t, acc, 1), u)
	balance(t, s)
}

// TestRetagSegments: pushing and popping a tag on frames whose first bytes
// span segments (as a guest's TX chain may split them) gives the bytes
// of the frame with the tag moved, and the frame's own view back after.
func TestRetagSegments(t *testing.T) {
	plain := ethFrame(0x0200_0000_0002, 0x0200_0000_0001, "payload payload payload")
	tag := tagged(9, plain)
	split := func(b []byte, cuts ...int) [][]byte {
		var out [][]byte
		prev := 0
		for _, c := range cuts {
			out = append(out, b[prev:c])
			prev = c
		}
		return append(out, b[prev:])
	}
	access := newPortVLAN(portspec.VLANs{Tag: 9})
	trunk := newPortVLAN(portspec.VLANs{Trunks: []int{9}})
	for _, cuts := range [][]int{nil, {1, 6}, {12}, {13, 15}, {16}, {5, 14, 17}} {
		var b Burst
		var tv tagViews
		b.Set(0, split(plain, cuts...), len(plain))
		b.Set(1, split(tag, cuts...), len(tag))
		tv.set(0, 9, false, false)
		tv.set(1, 9, true, true)
		for _, c := range []struct {
			out  *portVLAN
			want [2][]byte
		}{{trunk, [2][]byte{tag, tag}}, {access, [2][]byte{plain, plain}}} {
			sw := tv.retag(&b, 3, c.out)
			for i := 0; i < 2; i++ {
				f := b.Frame(i)
				buf := make([]byte, f.Len())
				if n := f.CopyTo(buf); n != f.Len() || !bytes.Equal(buf, c.want[i]) {
					t.Fatalf("cuts %v frame %d: %x (%d of len %d)\nwant %x", cuts, i, buf, n, f.Len(), c.want[i])
				}
			}
			tv.swap(&b, sw)
			if b.Frame(0).Len() != len(plain) || b.Frame(1).Len() != len(tag) {
				t.Fatalf("cuts %v: the frames' own views did not come back", cuts)
			}
		}
	}
}

// TestForwardVLANAllocs: a burst that has every frame's tag pushed on its
// way out allocates nothing (after the first, which sizes the views).
func TestForwardVLANAllocs(t *testing.T) {
	if n := newVLANBurstRig(t).allocsPerBurst(t, 200); n != 0 {
		t.Fatalf("%v allocations per burst", n)
	}
}

// BenchmarkForwardVLANBurst32 is BenchmarkForwardBurst32 from an access
// port to a trunk: every frame classified and its tag pushed.
func BenchmarkForwardVLANBurst32(b *testing.B) {
	r := newVLANBurstRig(b)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r.burst()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*MaxBurst), "ns/frame")
}

// newVLANBurstRig is newBurstRig with a in VLAN 3 (vlan=3) and the sink a
// trunk of it, so every frame leaves tagged.
func newVLANBurstRig(tb testing.TB) *burstRig {
	s, err := New(Config{Workers: 1, Ctl: "x"})
	if err != nil {
		tb.Fatal(err)
	}
	r := &burstRig{s: s, w: s.workers[0], a: newFakePort(), sink: &sinkPort{}}
	s.addSecuredPort("a", r.a, security{maxMACs: 8, vlans: portspec.VLANs{Tag: 3}})
	s.addSecuredPort("b", r.sink, security{maxMACs: 8, vlans: portspec.VLANs{Trunks: []int{3}}})
	s.fdb.AddStatic(FDBKey(3, 0x0200_0000_0002), 1)
	for i := 0; i < MaxBurst; i++ {
		r.frames = append(r.frames, ethFrame(0x0200_0000_0002, 0x0200_0000_0001, "0123456789012345678901234567890123456789012345678901"))
	}
	return r
}

// TestRetagMovesOffload: a guest's partial checksum (csum_start from the
// frame's first byte) moves with a pushed or popped tag.
func TestRetagMovesOffload(t *testing.T) {
	plain := ethFrame(0x0200_0000_0002, 0x0200_0000_0001, "payload payload payload")
	var b Burst
	var tv tagViews
	b.SetOne(0, plain)
	b.SetOffload(0, virtionet.MakeOffload(virtionet.Header{Flags: virtionet.FlagNeedsCsum, CsumStart: 34, CsumOffset: 16}))
	tv.set(0, 9, false, false)
	sw := tv.retag(&b, 1, newPortVLAN(portspec.VLANs{Trunks: []int{9}}))
	if got := b.Frame(0).off.CsumStart(); sw != 1 || got != 38 {
		t.Fatalf("pushed: swapped %b, csum_start %d, want 38", sw, got)
	}
	tv.swap(&b, sw)
	if got := b.Frame(0).off.CsumStart(); got != 34 {
		t.Fatalf("own view: csum_start %d, want 34", got)
	}
}
