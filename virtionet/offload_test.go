package virtionet

import (
	"bytes"
	"math/rand"
	"testing"

	"github.com/xvswitch/xvswitch/virtq"
)

const featOffloads = 1<<FeatureCsum | 1<<FeatureHostTSO4 | 1<<FeatureHostTSO6 |
	1<<FeatureGuestCsum | 1<<FeatureGuestTSO4 | 1<<FeatureGuestTSO6

// sendWithHeader makes frame available on a TX ring behind header h, laid
// out as l lays out a chain.
func (g *guest) sendWithHeader(h Header, frame []byte, l txLayout) uint16 {
	bufs := g.txChain(frame, HeaderLen, l)
	var hb [HeaderLen]byte
	h.Encode(hb[:])
	// txChain filled the header with junk: overwrite it where it landed.
	n := 0
	for _, b := range bufs {
		if n == HeaderLen {
			break
		}
		k := min(uint32(HeaderLen-n), b.Len)
		copy(g.m.Bytes(b.Addr, uint64(k)), hb[n:])
		n += int(k)
	}
	return g.add(bufs)
}

// TestTxOffloadHeaders: a guest that negotiated the offloads gets its
// header's metadata carried with the frame, wherever the header sits in
// the chain, and every hostile header is a drop with its own reason.
func TestTxOffloadHeaders(t *testing.T) {
	const flen = 1500
	tso := Header{Flags: FlagNeedsCsum, GSOType: GSOTCPv4, HdrLen: 54, GSOSize: 1448, CsumStart: 34, CsumOffset: 16}
	cases := []struct {
		name     string
		features uint64
		h        Header
		drop     DropReason // NumDropReasons: passes
		want     Header     // the metadata that comes out
	}{
		{"plain", featOffloads, Header{}, NumDropReasons, Header{}},
		{"csum", featOffloads, Header{Flags: FlagNeedsCsum, CsumStart: 34, CsumOffset: 6}, NumDropReasons,
			Header{Flags: FlagNeedsCsum, CsumStart: 34, CsumOffset: 6}},
		{"tso4", featOffloads, tso, NumDropReasons, tso},
		{"csum-at-end", featOffloads, Header{Flags: FlagNeedsCsum, CsumStart: flen - 2}, NumDropReasons,
			Header{Flags: FlagNeedsCsum, CsumStart: flen - 2}},
		{"data-valid-cleared", featOffloads, Header{Flags: FlagDataValid | FlagNeedsCsum, CsumStart: 34, CsumOffset: 6}, NumDropReasons,
			Header{Flags: FlagNeedsCsum, CsumStart: 34, CsumOffset: 6}},
		{"junk-ignored-without-csum", featV1, Header{Flags: 0xff, GSOType: 0xee, CsumStart: 0xffff}, NumDropReasons, Header{}},
		{"csum-start-out", featOffloads, Header{Flags: FlagNeedsCsum, CsumStart: flen - 1}, DropBadCsumOffset, Header{}},
		{"csum-offset-out", featOffloads, Header{Flags: FlagNeedsCsum, CsumStart: 34, CsumOffset: 0xffff}, DropBadCsumOffset, Header{}},
		{"gso-unknown", featOffloads, Header{Flags: FlagNeedsCsum, GSOType: 2, GSOSize: 1000, CsumStart: 34, CsumOffset: 16}, DropBadGSOType, Header{}},
		{"gso-ufo", featOffloads, Header{Flags: FlagNeedsCsum, GSOType: GSOUDP, GSOSize: 1000, CsumStart: 34, CsumOffset: 6}, DropBadGSOType, Header{}},
		{"gso-ecn", featOffloads, Header{Flags: FlagNeedsCsum, GSOType: GSOTCPv4 | GSOECN, GSOSize: 1000, CsumStart: 34, CsumOffset: 16}, DropBadGSOType, Header{}},
		{"gso-not-negotiated", featOffloads &^ (1 << FeatureHostTSO4), tso, DropBadGSOType, Header{}},
		{"gso-size-zero", featOffloads, Header{Flags: FlagNeedsCsum, GSOType: GSOTCPv6, CsumStart: 54, CsumOffset: 16}, DropBadGSOSize, Header{}},
		{"gso-size-huge", featOffloads, Header{Flags: FlagNeedsCsum, GSOType: GSOTCPv6, GSOSize: flen + 1, CsumStart: 54, CsumOffset: 16}, DropBadGSOSize, Header{}},
		{"gso-without-csum", featOffloads, Header{GSOType: GSOTCPv4, GSOSize: 1448}, DropGSOWithoutCsum, Header{}},
	}
	for _, k := range kinds {
		for _, l := range layouts {
			for _, tc := range cases {
				t.Run(k.String()+"/"+l.String()+"/"+tc.name, func(t *testing.T) {
					g := newGuest(t, k, 64, 0)
					q := NewTxQueue(g.ring, QueueConfig{Index: 1, Features: featV1 | tc.features})
					fr := frame(rand.New(rand.NewSource(1)), flen)
					g.sendWithHeader(tc.h, fr, l)
					if n, err := q.Receive(virtq.MaxBurst); n != 1 || err != nil {
						t.Fatalf("Receive = %d, %v", n, err)
					}
					f := q.Frames()
					s := q.LastBurst()
					if tc.drop != NumDropReasons {
						if f.Len() != 0 || s.Drops[tc.drop] != 1 || s.Dropped() != 1 {
							t.Fatalf("frames %d, drops %v: want one %s", f.Len(), s.Drops, tc.drop)
						}
						return
					}
					if f.Len() != 1 || !bytes.Equal(gather(f, 0), fr) {
						t.Fatalf("frames %d, want the frame", f.Len())
					}
					if got := f.Offload(0).Header(); got != tc.want {
						t.Fatalf("metadata %+v, want %+v", got, tc.want)
					}
				})
			}
		}
	}
}

// TestTxGSOTooLong: a GSO frame may exceed the MTU up to MaxGSOFrameLen,
// not beyond; a plain frame past the MTU is too long as before.
func TestTxGSOTooLong(t *testing.T) {
	h := Header{Flags: FlagNeedsCsum, GSOType: GSOTCPv4, GSOSize: 1448, CsumStart: 34, CsumOffset: 16}
	for _, tc := range []struct {
		h    Header
		n    int
		drop DropReason
	}{
		{h, MaxGSOFrameLen, NumDropReasons},
		{h, MaxGSOFrameLen + 1, DropGSOTooLong},
		{Header{}, MaxFrameLen(1500) + 1, DropTooLong},
	} {
		g := newGuest(t, kindPacked, 64, 0)
		q := NewTxQueue(g.ring, QueueConfig{Index: 1, Features: featV1 | featOffloads})
		g.sendWithHeader(tc.h, make([]byte, tc.n), frameScatter)
		if _, err := q.Receive(virtq.MaxBurst); err != nil {
			t.Fatal(err)
		}
		s := q.LastBurst()
		if tc.drop == NumDropReasons {
			if q.Frames().Len() != 1 {
				t.Fatalf("%d bytes: dropped %v", tc.n, s.Drops)
			}
			continue
		}
		if s.Drops[tc.drop] != 1 {
			t.Fatalf("%d bytes: drops %v, want %s", tc.n, s.Drops, tc.drop)
		}
	}
}

// TestRxOffloadHeader: a frame's metadata reaches the receiving guest's
// header, on the fast path (one buffer) and merged over several, with
// num_buffers beside it; a plain frame's header stays zero.
func TestRxOffloadHeader(t *testing.T) {
	tso := MakeOffload(Header{Flags: FlagNeedsCsum, GSOType: GSOTCPv6, HdrLen: 74, GSOSize: 1428, CsumStart: 54, CsumOffset: 16})
	for _, k := range kinds {
		for _, bufSize := range []uint32{HeaderLen + 2000, 1024} {
			g, q := rxCase(t, k, 0, featMrg|featOffloads, 0)
			for i := 0; i < 16; i++ {
				g.post(bufSize)
			}
			rng := rand.New(rand.NewSource(3))
			a, b := frame(rng, 1800), frame(rng, 1500)
			f := &Frames{}
			f.AddOffload([][]byte{a}, len(a), tso)
			f.AddBytes(b)
			if n, err := q.Deliver(f); n != 2 || err != nil {
				t.Fatalf("Deliver = %d, %v", n, err)
			}
			cs := g.reap()
			first := DecodeHeader(g.chainBytes(cs[0].id, HeaderLen))
			nb := int(first.NumBuffers)
			first.NumBuffers = 0
			if first != tso.Header() {
				t.Fatalf("%s/%d: header %+v, want %+v", k, bufSize, first, tso.Header())
			}
			second := DecodeHeader(g.chainBytes(cs[nb].id, HeaderLen))
			second.NumBuffers = 0
			if second != (Header{}) {
				t.Fatalf("%s/%d: plain frame's header %+v", k, bufSize, second)
			}
		}
	}
}

// TestOffloadsAccepts: what a guest takes as it is.
func TestOffloadsAccepts(t *testing.T) {
	csum := MakeOffload(Header{Flags: FlagNeedsCsum, CsumStart: 34, CsumOffset: 16})
	tso4 := MakeOffload(Header{Flags: FlagNeedsCsum, GSOType: GSOTCPv4, GSOSize: 1448, CsumStart: 34, CsumOffset: 16})
	tso6 := MakeOffload(Header{Flags: FlagNeedsCsum, GSOType: GSOTCPv6, GSOSize: 1448, CsumStart: 54, CsumOffset: 16})
	all, none := OffloadsOf(featOffloads), OffloadsOf(0)
	onlyCsum := OffloadsOf(1 << FeatureGuestCsum)
	// TSO bits without the checksum bit are not offloads at all.
	tsoNoCsum := OffloadsOf(1<<FeatureGuestTSO4 | 1<<FeatureHostTSO4)
	for _, tc := range []struct {
		n    Offloads
		o    Offload
		want bool
	}{
		{none, Offload{}, true}, {none, csum, false}, {none, tso4, false},
		{onlyCsum, csum, true}, {onlyCsum, tso4, false},
		{all, csum, true}, {all, tso4, true}, {all, tso6, true},
		{tsoNoCsum, tso4, false},
	} {
		if got := tc.n.Accepts(tc.o); got != tc.want {
			t.Errorf("%+v accepts %+v = %v", tc.n, tc.o.Header(), got)
		}
	}
	if tsoNoCsum.TSO4 || tsoNoCsum.GuestTSO4 {
		t.Error("TSO without CSUM counted")
	}
}

// FuzzCheckOffload: whatever header bytes a guest sends with a frame of
// whatever length, what passes the check is safe to act on: a checksum
// field inside the frame, a GSO frame with a segment size in (0, frame]
// that asked for its checksum and fits MaxGSOFrameLen.
func FuzzCheckOffload(f *testing.F) {
	var b [HeaderLen]byte
	(&Header{Flags: FlagNeedsCsum, GSOType: GSOTCPv4, GSOSize: 1448, CsumStart: 34, CsumOffset: 16}).Encode(b[:])
	f.Add(b[:], 3000, uint64(featOffloads))
	f.Fuzz(func(t *testing.T, hdr []byte, flen int, features uint64) {
		if flen < 0 || flen > 1<<20 {
			return
		}
		o := readOffload([][]byte{hdr})
		got, _, ok := OffloadsOf(features).checkOffload(o, flen)
		if !ok {
			return
		}
		if got.Flags()&^FlagNeedsCsum != 0 {
			t.Fatalf("flags %#x passed", got.Flags())
		}
		if got.NeedsCsum() && int(got.CsumStart())+int(got.CsumOffset())+2 > flen {
			t.Fatalf("checksum field outside a %d-byte frame: %+v", flen, got.Header())
		}
		if got.GSO() && (!got.NeedsCsum() || got.GSOSize() == 0 || int(got.GSOSize()) > flen || flen > MaxGSOFrameLen ||
			(got.GSOType() != GSOTCPv4 && got.GSOType() != GSOTCPv6)) {
			t.Fatalf("GSO passed: %+v, %d bytes", got.Header(), flen)
		}
	})
}
