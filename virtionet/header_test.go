package virtionet

import "testing"

func TestHeaderRoundTrip(t *testing.T) {
	h := Header{Flags: 1, GSOType: 2, HdrLen: 0x304, GSOSize: 0x506, CsumStart: 0x708, CsumOffset: 0x90a, NumBuffers: 0xb0c}
	var b [HeaderLen]byte
	h.Encode(b[:])
	want := [HeaderLen]byte{1, 2, 4, 3, 6, 5, 8, 7, 0xa, 9, 0xc, 0xb}
	if b != want {
		t.Fatalf("encoded % x, want % x", b, want)
	}
	if got := DecodeHeader(b[:]); got != h {
		t.Fatalf("decoded %+v", got)
	}
	legacy := DecodeHeader(b[:LegacyHeaderLen])
	if legacy.NumBuffers != 0 || legacy.CsumOffset != h.CsumOffset {
		t.Fatalf("legacy decode %+v", legacy)
	}
	if DecodeHeader(b[:3]) != (Header{}) {
		t.Fatal("short header not zero")
	}
	if HeaderLenFor(0) != LegacyHeaderLen || HeaderLenFor(featV1) != HeaderLen || HeaderLenFor(featMrg) != HeaderLen {
		t.Fatal("HeaderLenFor")
	}
}
