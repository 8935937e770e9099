package vswitch

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/xvswitch/xvswitch/portspec"
)

// TestBridgeRemembersOneBurst: within a burst a frame with the previous
// frame's MACs goes where that one went; any other pair is decided by the
// FDB; and what was remembered is gone at the next burst, so a MAC that
// moved in between is followed at once.
func TestBridgeRemembersOneBurst(t *testing.T) {
	s, a, b, c := threePortSwitch(t)
	const macA, macB, macC = 0x0200_0000_000a, 0x0200_0000_000b, 0x0200_0000_000c
	s.fdb.Learn(macB, 1)
	w := s.workers[0]
	burst := func(frames ...[]byte) {
		t.Helper()
		a.put(frames...)
		snap := s.snap.Load()
		if n, err := w.forward(snap, snap.polls[0][0]); n != len(frames) || err != nil {
			t.Fatalf("forwarded %d, %v", n, err)
		}
	}
	toB, toC, toA := ethFrame(macB, macA, "b"), ethFrame(macC, macA, "c"), ethFrame(macA, macA, "a")
	// B is known, C is not (flooded to b and c), A was learned on a by
	// the first frame (hairpin).
	burst(toB, toB, toC, toC, toB, toA, toA, toB)
	want := func(f *fakePort, name string, frames ...[]byte) {
		t.Helper()
		got := f.frames()
		if len(got) != len(frames) {
			t.Fatalf("%s got %d frames, want %d", name, len(got), len(frames))
		}
		for i := range got {
			if !bytes.Equal(got[i], frames[i]) {
				t.Fatalf("%s frame %d: %q, want %q", name, i, got[i], frames[i])
			}
		}
	}
	want(b, "b", toB, toB, toC, toC, toB, toB)
	want(c, "c", toC, toC)
	if d := s.Stats()[0].Drops["hairpin"]; d != 2 {
		t.Fatalf("%d hairpin drops, want 2", d)
	}
	// B moves to c between bursts: the next burst follows it from its
	// first frame, with the same MACs as the last burst's last frame.
	s.fdb.Learn(macB, 2)
	burst(toB, toB)
	want(b, "b", toB, toB, toC, toC, toB, toB)
	want(c, "c", toC, toC, toB, toB)
}

// TestBridgeMemoryFollowsFDBChanges: the memory of the previous frame
// never outlives an FDB or port change. A burst ends with frames a -> B
// going to b; after each change the next burst's frames, with those same
// MACs, go where the changed FDB (or port table, or VLAN configuration)
// says, from the first of them.
func TestBridgeMemoryFollowsFDBChanges(t *testing.T) {
	const macA, macB = 0x0200_0000_000a, 0x0200_0000_000b
	tagged := func(f []byte) []byte { return vlanTagged(f, 10) }
	cases := []struct {
		name   string
		frame  func([]byte) []byte // the frame a sends, from its untagged form
		change func(t *testing.T, s *Switch)
		// what b and c have got after the second burst of 2 frames
		b, c int
	}{
		{name: "moved by a frame from c", change: func(t *testing.T, s *Switch) {
			// B sends on c: learned there, as the data path learns.
			forwardOne(t, s, 2, ethFrame(macA, macB, "moved"))
		}, b: 2, c: 2}, // (B's frame went to a, where A was learned)
		{name: "moved by Learn", change: func(t *testing.T, s *Switch) { s.fdb.Learn(macB, 2) }, b: 2, c: 2},
		{name: "flushed", change: func(t *testing.T, s *Switch) { s.fdb.FlushPort(1) }, b: 4, c: 2},
		{name: "aged out", change: func(t *testing.T, s *Switch) {
			s.clock.Set(s.clock.Now() + 300)
			if n := s.fdb.Age(300); n == 0 {
				t.Fatal("nothing aged out")
			}
		}, b: 4, c: 2},
		{name: "port b removed", change: func(t *testing.T, s *Switch) {
			if err := s.DelPort("b"); err != nil {
				t.Fatal(err)
			}
		}, b: 2, c: 2},
		{name: "a VLAN port added", frame: tagged, change: func(t *testing.T, s *Switch) {
			// With VLANs on, a (no VLAN settings: every VLAN) bridges
			// the tagged frames in their VLAN 10, where B is unknown:
			// flooded, no more to b alone as in VLAN 0 before.
			if _, err := s.addSecuredPort("v", newFakePort(), security{vlans: portspec.VLANs{Tag: 10}}); err != nil {
				t.Fatal(err)
			}
		}, b: 4, c: 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, _, b, c := threePortSwitch(t)
			s.fdb.Learn(macB, 1)
			toB := ethFrame(macB, macA, "b")
			if tc.frame != nil {
				toB = tc.frame(toB)
			}
			forwardOne(t, s, 0, toB, toB)
			if n := len(b.frames()); n != 2 {
				t.Fatalf("b got %d frames before the change, want 2", n)
			}
			tc.change(t, s)
			forwardOne(t, s, 0, toB, toB)
			if nb, nc := len(b.frames()), len(c.frames()); nb != tc.b || nc != tc.c {
				t.Fatalf("b got %d frames, c %d; want %d, %d", nb, nc, tc.b, tc.c)
			}
		})
	}
}

// forwardOne forwards one burst of frames from port index p's queue.
func forwardOne(t *testing.T, s *Switch, p int, frames ...[]byte) {
	t.Helper()
	snap := s.snap.Load()
	src := snap.ports[p]
	src.drv.(*fakePort).put(frames...)
	if n, err := s.workers[0].forward(snap, src.in[0]); n != len(frames) || err != nil {
		t.Fatalf("forwarded %d of %d, %v", n, len(frames), err)
	}
}

// threePortSwitch is a switch with one worker (not running: tests call
// its forward) and fake ports a, b and c at indexes 0, 1 and 2.
func threePortSwitch(t *testing.T) (s *Switch, a, b, c *fakePort) {
	t.Helper()
	s, err := New(Config{Workers: 1, Ctl: "x"})
	if err != nil {
		t.Fatal(err)
	}
	a, b, c = newFakePort(), newFakePort(), newFakePort()
	for i, f := range []*fakePort{a, b, c} {
		if _, err := s.addPort(string(rune('a'+i)), f, 0); err != nil {
			t.Fatal(err)
		}
	}
	return s, a, b, c
}

// TestBridgeSameFlowRuns: one burst of runs of one flow broken by every
// kind of frame that must not join them (another destination, a runt, the
// same MACs with another type, a hairpin, another source), from a plain
// port and from one that sends only from its own MAC: each frame goes
// where the full classification sends it, in order, and the ingress port
// counts every frame, its bytes and its drops.
func TestBridgeSameFlowRuns(t *testing.T) {
	const macA, macB, macC, macF, macX = 0x0200_0000_000a, 0x0200_0000_000b, 0x0200_0000_000c, 0x0200_0000_00f0, 0x0200_0000_00ff
	for _, secured := range []bool{false, true} {
		t.Run(map[bool]string{false: "plain", true: "own source"}[secured], func(t *testing.T) {
			s, _, b, c := threePortSwitch(t)
			in, name := 0, "a"
			if secured {
				if _, err := s.addSecuredPort("d", newFakePort(), security{mac: macA, ownSource: true}); err != nil {
					t.Fatal(err)
				}
				in, name = 3, "d"
			}
			s.fdb.Learn(macB, 1)
			s.fdb.Learn(macC, 2)
			s.fdb.Learn(macX, in) // behind the ingress port: a hairpin
			var frames, toB, toC [][]byte
			add := func(f []byte, to *[][]byte) {
				frames = append(frames, f)
				if to != nil {
					*to = append(*to, f)
				}
			}
			for i := 0; i < 4; i++ {
				add(ethFrame(macB, macA, fmt.Sprint("b", i)), &toB)
			}
			for i := 0; i < 3; i++ {
				add(ethFrame(macC, macA, fmt.Sprint("c", i)), &toC)
			}
			add(ethFrame(macB, macA, "b4"), &toB)
			add(ethFrame(macB, macA, "b5"), &toB)
			add([]byte{1, 2, 3}, nil) // runt
			for i := 6; i < 9; i++ {
				add(ethFrame(macB, macA, fmt.Sprint("b", i)), &toB)
			}
			// Another source right after a run: only the header's
			// second word differs.
			for i := 0; i < 3; i++ {
				f := ethFrame(macB, macF, "forged")
				if secured {
					add(f, nil)
				} else {
					add(f, &toB)
				}
			}
			other := ethFrame(macB, macA, "ip")
			other[12], other[13] = 0x08, 0x00
			add(other, &toB)
			add(other, &toB)
			for i := 0; i < 3; i++ {
				add(ethFrame(macX, macA, "hairpin"), nil)
			}
			add(ethFrame(macB, macA, "b9"), &toB)
			add(ethFrame(macB, macA, "b10"), &toB)
			add(ethFrame(bcast, macA, "all"), &toB)
			toC = append(toC, frames[len(frames)-1])
			if len(frames) > MaxBurst {
				t.Fatalf("%d frames: more than a burst", len(frames))
			}
			forwardOne(t, s, in, frames...)
			for _, p := range []struct {
				name      string
				got, want [][]byte
			}{{"b", b.frames(), toB}, {"c", c.frames(), toC}} {
				if len(p.got) != len(p.want) {
					t.Fatalf("%s got %d frames, want %d", p.name, len(p.got), len(p.want))
				}
				for i := range p.got {
					if !bytes.Equal(p.got[i], p.want[i]) {
						t.Fatalf("%s frame %d: %q, want %q", p.name, i, p.got[i][14:], p.want[i][14:])
					}
				}
			}
			var bytesIn uint64
			for _, f := range frames {
				bytesIn += uint64(len(f))
			}
			spoofed := map[bool]uint64{true: 3}[secured]
			for _, p := range s.Stats() {
				if p.Name != name {
					continue
				}
				if p.RxPackets != uint64(len(frames)) || p.RxBytes != bytesIn || p.Drops["malformed"] != 1 || p.Drops["hairpin"] != 3 || p.Drops["spoofed_source"] != spoofed {
					t.Fatalf("%s counted %d frames, %d bytes, drops %v; want %d, %d, 1 malformed, 3 hairpin, %d spoofed", name, p.RxPackets, p.RxBytes, p.Drops, len(frames), bytesIn, spoofed)
				}
				return
			}
			t.Fatalf("no stats for %s", name)
		})
	}
}
