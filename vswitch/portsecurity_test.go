package vswitch

import (
	"bytes"
	"fmt"
	"slices"
	"testing"

	"github.com/xvswitch/xvswitch/portspec"
	"github.com/xvswitch/xvswitch/vhost/vhosttest"
)

// floodSources sends n broadcast frames from g, each from a different
// unicast source MAC (a bijection of i, so all distinct), and waits until
// the switch has received them all.
func floodSources(t *testing.T, s *Switch, g *guest, n int) {
	t.Helper()
	frames := make([][]byte, n)
	for i := range frames {
		src := 0x0266_0000_0000 | uint64(uint32(i)*2654435761)
		frames[i] = ethFrame(bcast, src, "random source")
	}
	before := portStats(s, g.name).RxPackets
	for sent := 0; sent < n; {
		sent += g.fe.Send(0, frames[sent:]...)
	}
	waitFor(t, "the flood received", func() bool { return portStats(s, g.name).RxPackets == before+uint64(n) })
}

// TestMACFloodCannotExhaustFDB: a guest on a port without mac= sends from
// more random source MACs than the whole FDB holds. It gets no more than
// its limit; another guest's MAC is still learned, so unicast to it is not
// flooded to the attacker; the bystanders keep forwarding.
func TestMACFloodCannotExhaustFDB(t *testing.T) {
	s := startTestSwitch(t, Config{Workers: 1})
	a, b := bystanders(t, s)
	evil := addGuestSpec(t, s, portspec.Vhost{Name: "evil"}, 0x0266_0000_0001, vhosttest.Options{Packed: true})
	victim := addGuestSpec(t, s, portspec.Vhost{Name: "victim"}, 0x0276_0000_0001, vhosttest.Options{})

	calm := exchange(t, a, b, 64)
	const flood = 5000 // more than the FDB's 4096
	floodSources(t, s, evil, flood)
	if n := learnedCount(s.fdb, s.byName["evil"].idx); n != DefaultMaxMACs {
		t.Errorf("the attacker's port holds %d learned MACs, want its limit %d", n, DefaultMaxMACs)
	}
	if got, want := portStats(s, "evil").LearnRefused, uint64(flood-DefaultMaxMACs); got != want {
		t.Errorf("learn_refused %d, want %d", got, want)
	}

	// The victim announces itself (a broadcast, as ARP would).
	victim.fe.Send(0, victim.frameTo(bcast, 0))
	waitFor(t, "the victim's frame", func() bool { return portStats(s, "victim").RxPackets == 1 })
	if got, want := s.fdb.Lookup(victim.mac), s.byName["victim"].idx; got != want {
		t.Errorf("the victim's MAC maps to port %d, want %d (learned)", got, want)
	}

	evil.fe.PostRx(0, 16)
	victim.fe.PostRx(0, 16)
	evilTx, bRx := portStats(s, "evil").TxPackets, portStats(s, "bystander-b").RxPackets
	const n = 10
	for i := 0; i < n; i++ {
		b.fe.Send(0, b.frameTo(victim.mac, i))
	}
	victim.receive(t, 0, n)
	waitFor(t, "b's frames counted", func() bool { return portStats(s, "bystander-b").RxPackets == bRx+n })
	if got := portStats(s, "evil").TxPackets - evilTx; got != 0 {
		t.Errorf("%d of b's frames to the victim were flooded to the attacker", got)
	}
	if got := evil.fe.Receive(0); len(got) != 0 {
		t.Errorf("the attacker received %d frames", len(got))
	}
	t.Logf("bystander exchange: %v before the flood, %v after", calm, exchange(t, a, b, 64))
	balance(t, s)
	if st := portStats(s, "victim"); st.LearnRefused != 0 {
		t.Errorf("the victim was refused learning %d times", st.LearnRefused)
	}
}

// TestMACLimitOption: maxmacs= sets a port's limit; the frames from MACs
// over it are still forwarded (refused learning is not a drop), and a MAC
// that goes (deleted here, as aging does) frees its place for a new one.
func TestMACLimitOption(t *testing.T) {
	s := startTestSwitch(t, Config{Workers: 1})
	a, b := bystanders(t, s)
	g := addGuestSpec(t, s, portspec.Vhost{Name: "g", MaxMACs: 3}, 0x0266_0000_0001, vhosttest.Options{Packed: true})
	a.fe.PostRx(0, 8)
	var frames [][]byte
	for i := 0; i < 5; i++ {
		frames = append(frames, ethFrame(a.mac, 0x0266_0000_0010+uint64(i), "to a"))
	}
	g.fe.Send(0, frames...)
	a.receive(t, 0, len(frames))
	waitFor(t, "g's frames counted", func() bool { return portStats(s, "g").RxPackets == uint64(len(frames)) })
	if n, st := learnedCount(s.fdb, s.byName["g"].idx), portStats(s, "g"); n != 3 || st.LearnRefused != 2 || len(st.Drops) != 0 {
		t.Errorf("learned %d, refused %d, drops %v; want 3, 2, none", n, st.LearnRefused, st.Drops)
	}
	s.fdb.Delete(0x0266_0000_0010) // as aging would
	g.fe.Send(0, ethFrame(a.mac, 0x0266_0000_0020, "to a"))
	a.receive(t, 0, 1)
	if p := s.fdb.Lookup(0x0266_0000_0020); p != s.byName["g"].idx {
		t.Errorf("a new MAC after one went: on port %d, want g's", p)
	}
	exchange(t, a, b, 8)
	balance(t, s)
}

// TestSpoofedSource: a guest on a port with mac= sends frames from its own
// MAC and from others (unknown, another guest's, a group address). By
// default only its own arrive, the others are dropped as spoofed_source
// and not learned; with spoof=allow all arrive and the unknown source is
// learned on its port. Either way another port's configured MAC stays.
func TestSpoofedSource(t *testing.T) {
	for _, allow := range []bool{false, true} {
		t.Run(fmt.Sprintf("allow=%v", allow), func(t *testing.T) {
			s := startTestSwitch(t, Config{Workers: 1})
			a, b := bystanders(t, s)
			const own, forged = 0x0252_5400_0009, 0x0252_5400_0f0f
			g := addGuestSpec(t, s, portspec.Vhost{Name: "g", MAC: MACString(own), AllowSpoof: allow}, own, vhosttest.Options{Packed: true})
			a.fe.PostRx(0, 16)
			frames := [][]byte{
				g.frameTo(a.mac, 0),
				ethFrame(a.mac, forged, "forged, unknown MAC"),
				ethFrame(a.mac, b.mac, "forged, another guest's MAC"),
				g.frameTo(a.mac, 1),
				ethFrame(a.mac, bcast, "forged, a group address"),
			}
			want, spoofed, forgedOn := [][]byte{frames[0], frames[3]}, uint64(3), NoPort
			if allow {
				want, spoofed, forgedOn = frames, 0, s.byName["g"].idx
			}
			if sent := g.fe.Send(0, frames...); sent != len(frames) {
				t.Fatalf("sent %d of %d", sent, len(frames))
			}
			waitFor(t, "g's frames counted", func() bool { return portStats(s, "g").RxPackets == uint64(len(frames)) })
			// Counted means forwarded: anything more for a is there now.
			if got := a.receive(t, 0, len(want)); !slices.EqualFunc(got, want, bytes.Equal) {
				t.Errorf("a got %q\nwant %q", got, want)
			}
			if d := portStats(s, "g").Drops["spoofed_source"]; d != spoofed {
				t.Errorf("spoofed_source drops %d, want %d", d, spoofed)
			}
			if p := s.fdb.Lookup(forged); p != forgedOn {
				t.Errorf("the forged MAC is on port %d, want %d", p, forgedOn)
			}
			if p, want := s.fdb.Lookup(b.mac), s.byName["bystander-b"].idx; p != want {
				t.Errorf("b's configured MAC moved to port %d", p)
			}
			exchange(t, a, b, 16)
			balance(t, s)
		})
	}
}

// TestSpoofedSourceCrossConnect: source MACs are enforced on a
// cross-connected port too: the forged frame does not reach the partner.
func TestSpoofedSourceCrossConnect(t *testing.T) {
	s := startTestSwitch(t, Config{Workers: 1, XConnects: []portspec.XConnect{{A: "wire", B: "g"}},
		NICs: []portspec.NIC{{Name: "wire"}}, Vhosts: []portspec.Vhost{{Name: "g"}}})
	wire := newFakePort()
	if _, err := s.addPort("wire", wire, 0); err != nil {
		t.Fatal(err)
	}
	g := addGuest(t, s, "g", 0x0252_5400_0009, vhosttest.Options{})
	own := g.frameTo(bcast, 0)
	g.fe.Send(0, ethFrame(bcast, 0x0252_5400_0f0f, "forged"), own)
	waitFor(t, "g's frames counted", func() bool { return portStats(s, "g").RxPackets == 2 })
	if got := wire.frames(); len(got) != 1 || string(got[0]) != string(own) {
		t.Errorf("the partner got %q, want g's own frame only", got)
	}
	if d := portStats(s, "g").Drops["spoofed_source"]; d != 1 {
		t.Errorf("spoofed_source %d, want 1", d)
	}
	balance(t, s)
}
