package offload

import (
	"bytes"
	"encoding/binary"
	"math/rand"
	"testing"
)

// tcpPacket builds an Ethernet frame with one TCP segment: IPv4 (with
// ID 0x1234) or IPv6, optional VLAN tag, TCP with 12 bytes of options,
// the given flags and payload, and its TCP checksum field holding the
// pseudo-header sum, as a guest sends it with NEEDS_CSUM.
func tcpPacket(v6, vlan bool, flags uint8, payload []byte) (frame []byte, csumStart, csumOffset int) {
	eth := []byte{2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1}
	if vlan {
		eth = append(eth, 0x81, 0x00, 0x00, 0x05)
	}
	tcp := make([]byte, 32)
	binary.BigEndian.PutUint16(tcp[0:], 40000)
	binary.BigEndian.PutUint16(tcp[2:], 5201)
	binary.BigEndian.PutUint32(tcp[4:], 0xfffff000) // wraps during the frame
	binary.BigEndian.PutUint32(tcp[8:], 77)
	tcp[12] = 8 << 4
	tcp[13] = flags
	binary.BigEndian.PutUint16(tcp[14:], 512)
	copy(tcp[20:], []byte{1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2}) // NOP NOP TS
	l4len := len(tcp) + len(payload)
	var ip []byte
	var pseudo uint64
	if v6 {
		eth = append(eth, 0x86, 0xdd)
		ip = make([]byte, 40)
		ip[0] = 0x60
		binary.BigEndian.PutUint16(ip[4:], uint16(l4len))
		ip[6], ip[7] = protoTCP, 64
		for i := 8; i < 40; i++ {
			ip[i] = byte(i * 7)
		}
		pseudo = refSum(ip[8:40]) + protoTCP + uint64(l4len)
	} else {
		eth = append(eth, 0x08, 0x00)
		ip = make([]byte, 20)
		ip[0] = 0x45
		binary.BigEndian.PutUint16(ip[2:], uint16(20+l4len))
		binary.BigEndian.PutUint16(ip[4:], 0x1234)
		ip[6] = 0x40 // DF
		ip[8], ip[9] = 64, protoTCP
		copy(ip[12:], []byte{10, 0, 0, 1, 10, 0, 0, 2})
		binary.BigEndian.PutUint16(ip[10:], ^refFold(refSum(ip)))
		pseudo = refSum(ip[12:20]) + protoTCP + uint64(l4len)
	}
	binary.BigEndian.PutUint16(tcp[16:], refFold(pseudo))
	frame = append(append(append(eth, ip...), tcp...), payload...)
	return frame, len(eth) + len(ip), 16
}

// refSum and refFold are a byte-at-a-time reference for the checksum
// code under test.
func refSum(b []byte) uint64 {
	var s uint64
	for i := 0; i < len(b); i++ {
		if i%2 == 0 {
			s += uint64(b[i]) << 8
		} else {
			s += uint64(b[i])
		}
	}
	return s
}

func refFold(s uint64) uint16 {
	for s > 0xffff {
		s = s>>16 + s&0xffff
	}
	return uint16(s)
}

// checkSegment verifies one segment on its own, as a receiver would: IP
// header checksum and length, TCP checksum over the pseudo-header, and
// returns its sequence number, flags and payload.
func checkSegment(t *testing.T, seg []byte, v6 bool) (seq uint32, flags uint8, payload []byte) {
	t.Helper()
	l3 := 14
	if binary.BigEndian.Uint16(seg[12:]) == 0x8100 {
		l3 = 18
	}
	var l4 int
	var pseudo uint64
	if v6 {
		l4 = l3 + 40
		if int(binary.BigEndian.Uint16(seg[l3+4:])) != len(seg)-l4 {
			t.Fatalf("IPv6 payload length %d, segment has %d", binary.BigEndian.Uint16(seg[l3+4:]), len(seg)-l4)
		}
		pseudo = refSum(seg[l3+8:l3+40]) + protoTCP + uint64(len(seg)-l4)
	} else {
		l4 = l3 + 20
		if refFold(refSum(seg[l3:l4])) != 0xffff {
			t.Fatal("IPv4 header checksum wrong")
		}
		if int(binary.BigEndian.Uint16(seg[l3+2:])) != len(seg)-l3 {
			t.Fatal("IPv4 total length wrong")
		}
		pseudo = refSum(seg[l3+12:l3+20]) + protoTCP + uint64(len(seg)-l4)
	}
	if refFold(pseudo+refSum(seg[l4:])) != 0xffff {
		t.Fatal("TCP checksum wrong")
	}
	return binary.BigEndian.Uint32(seg[l4+4:]), seg[l4+13], seg[l4+32:]
}

func TestSegmentTCP(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	dst := make([]byte, 128<<10)
	lens := make([]int, 256)
	for _, v6 := range []bool{false, true} {
		for _, vlan := range []bool{false, true} {
			for _, size := range []int{1, 1447, 1448, 1449, 64000, 65000} {
				payload := make([]byte, size)
				rng.Read(payload)
				const mss = 1448
				frame, _, _ := tcpPacket(v6, vlan, tcpCWR|tcpPSH|tcpFIN|0x10, payload)
				orig := append([]byte(nil), frame...)
				n, err := SegmentTCP(dst, lens, frame, v6, mss)
				if err != nil {
					t.Fatalf("v6=%v vlan=%v %d: %v", v6, vlan, size, err)
				}
				if want := (size + mss - 1) / mss; n != want {
					t.Fatalf("%d segments, want %d", n, want)
				}
				if !bytes.Equal(frame, orig) {
					t.Fatal("the frame was written")
				}
				var got []byte
				off := 0
				for k := 0; k < n; k++ {
					seg := dst[off : off+lens[k]]
					off += lens[k]
					seq, flags, p := checkSegment(t, seg, v6)
					if seq != 0xfffff000+uint32(k*mss) {
						t.Fatalf("segment %d: seq %#x", k, seq)
					}
					wantFlags := uint8(0x10)
					if k == 0 {
						wantFlags |= tcpCWR
					}
					if k == n-1 {
						wantFlags |= tcpPSH | tcpFIN
					}
					if flags != wantFlags {
						t.Fatalf("segment %d of %d: flags %#x, want %#x", k, n, flags, wantFlags)
					}
					if k < n-1 && len(p) != mss {
						t.Fatalf("segment %d: %d payload bytes", k, len(p))
					}
					if !v6 {
						l3 := 14 + map[bool]int{true: 4}[vlan]
						if id := binary.BigEndian.Uint16(seg[l3+4:]); id != 0x1234+uint16(k) {
							t.Fatalf("segment %d: IP id %#x", k, id)
						}
					}
					got = append(got, p...)
				}
				if !bytes.Equal(got, payload) {
					t.Fatal("payload does not reassemble")
				}
			}
		}
	}
}

func TestSegmentTCPRejects(t *testing.T) {
	dst := make([]byte, 128<<10)
	lens := make([]int, 64)
	good, _, _ := tcpPacket(false, false, 0x10, make([]byte, 4000))
	mutate := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), good...)) }
	for _, tc := range []struct {
		name  string
		frame []byte
		v6    bool
		mss   int
		dst   []byte
		lens  []int
		want  error
	}{
		{"mss0", good, false, 0, dst, lens, ErrMSS},
		{"wrong-family", good, true, 1448, dst, lens, ErrHeaders},
		{"short", good[:40], false, 1448, dst, lens, ErrHeaders},
		{"udp", mutate(func(b []byte) []byte { b[23] = 17; return b }), false, 1448, dst, lens, ErrHeaders},
		{"fragment", mutate(func(b []byte) []byte { b[20] |= 0x20; return b }), false, 1448, dst, lens, ErrHeaders},
		{"ihl-past-end", mutate(func(b []byte) []byte { b[14] = 0x4f; return b[:60] }), false, 1448, dst, lens, ErrHeaders},
		{"doff-past-end", mutate(func(b []byte) []byte { b[46] = 0xf0; return b[:80] }), false, 1448, dst, lens, ErrHeaders},
		{"doff-short", mutate(func(b []byte) []byte { b[46] = 0x40; return b }), false, 1448, dst, lens, ErrHeaders},
		{"dst-small", good, false, 1448, dst[:4000], lens, ErrNoRoom},
		{"lens-small", good, false, 1448, dst, lens[:2], ErrNoRoom},
		{"segment-too-long", append(append([]byte(nil), good[:66]...), make([]byte, 65500)...), false, 65535, dst, lens, ErrHeaders},
	} {
		if _, err := SegmentTCP(tc.dst, tc.lens, tc.frame, tc.v6, tc.mss); err != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
}

func TestCompletePartial(t *testing.T) {
	rng := rand.New(rand.NewSource(2))
	for _, v6 := range []bool{false, true} {
		for _, size := range []int{0, 1, 2, 3, 1400, 9001} {
			payload := make([]byte, size)
			rng.Read(payload)
			frame, start, offset := tcpPacket(v6, false, 0x18, payload)
			if err := CompletePartial(frame, start, offset); err != nil {
				t.Fatal(err)
			}
			checkSegment(t, frame, v6)
		}
	}
	b := make([]byte, 100)
	for _, tc := range [][2]int{{-1, 0}, {0, -1}, {99, 0}, {98, 1}, {0, 99}, {101, 0}, {1 << 62, 1 << 62}} {
		if err := CompletePartial(b, tc[0], tc[1]); err != ErrChecksumOutside {
			t.Errorf("start %d offset %d: %v", tc[0], tc[1], err)
		}
	}
	if err := CompletePartial(b, 98, 0); err != nil {
		t.Errorf("field at the end: %v", err)
	}
}

// TestChecksumMatchesReference: the word-at-a-time sum agrees with the
// byte-at-a-time one at every length and alignment.
func TestChecksumMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	b := make([]byte, 300)
	rng.Read(b)
	for lo := 0; lo < 8; lo++ {
		for hi := lo; hi <= len(b); hi++ {
			if got, want := Checksum(b[lo:hi]), ^refFold(refSum(b[lo:hi])); got != want {
				t.Fatalf("[%d:%d] %#x, want %#x", lo, hi, got, want)
			}
		}
	}
}

func TestNoAllocations(t *testing.T) {
	frame, start, offset := tcpPacket(true, true, 0x10, make([]byte, 64000))
	dst := make([]byte, 128<<10)
	lens := make([]int, 64)
	if a := testing.AllocsPerRun(20, func() {
		if _, err := SegmentTCP(dst, lens, frame, true, 1428); err != nil {
			t.Fatal(err)
		}
		_ = CompletePartial(frame, start, offset)
		_, _ = SegmentTCP(dst, lens, frame, false, 1428) // an error, still no allocation
	}); a != 0 {
		t.Fatalf("%v allocations per run", a)
	}
}

func BenchmarkSegmentTCP64K(b *testing.B) {
	frame, _, _ := tcpPacket(false, false, 0x10, make([]byte, 65000))
	dst := make([]byte, 128<<10)
	lens := make([]int, 64)
	b.SetBytes(int64(len(frame)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := SegmentTCP(dst, lens, frame, false, 1448); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCompletePartial1500(b *testing.B) {
	frame, start, offset := tcpPacket(false, false, 0x10, make([]byte, 1448))
	b.SetBytes(int64(len(frame)))
	b.ReportAllocs()
	for b.Loop() {
		_ = CompletePartial(frame, start, offset)
	}
}
