package offload

import (
	"bytes"
	"testing"
)

// FuzzSegmentTCP: whatever the frame (it is a guest's), SegmentTCP never
// panics, never writes the frame, and what it returns is segments that
// verify on their own and carry the frame's payload in order.
func FuzzSegmentTCP(f *testing.F) {
	for _, v6 := range []bool{false, true} {
		frame, _, _ := tcpPacket(v6, !v6, 0x99, make([]byte, 3000))
		f.Add(frame, v6, uint16(1000))
	}
	dst := make([]byte, 256<<10)
	lens := make([]int, 128)
	f.Fuzz(func(t *testing.T, frame []byte, v6 bool, mss uint16) {
		orig := append([]byte(nil), frame...)
		n, err := SegmentTCP(dst, lens, frame, v6, int(mss))
		if !bytes.Equal(frame, orig) {
			t.Fatal("the frame was written")
		}
		if err != nil {
			return
		}
		tf, _ := parseTCP(frame, v6)
		var got []byte
		off := 0
		for k := 0; k < n; k++ {
			seg := dst[off : off+lens[k]]
			off += lens[k]
			if len(seg) <= tf.payload && len(frame) > tf.payload {
				t.Fatal("a segment without payload")
			}
			got = append(got, seg[tf.payload:]...)
		}
		if !bytes.Equal(got, frame[tf.payload:]) {
			t.Fatal("payload does not reassemble")
		}
	})
}

// FuzzCompletePartial: any start and offset, never a panic, never a
// write outside the field, and the field written completes the sum: the
// covered bytes as they were (the partial sum in the field) plus the new
// field fold to all ones.
func FuzzCompletePartial(f *testing.F) {
	f.Add([]byte("0123456789abcdef"), 4, 2)
	f.Add([]byte{}, 0, 0)
	f.Fuzz(func(t *testing.T, b []byte, start, offset int) {
		orig := append([]byte(nil), b...)
		if err := CompletePartial(b, start, offset); err != nil {
			if !bytes.Equal(b, orig) {
				t.Fatal("written on error")
			}
			return
		}
		at := start + offset
		if !bytes.Equal(b[:at], orig[:at]) || !bytes.Equal(b[at+2:], orig[at+2:]) {
			t.Fatal("written outside the field")
		}
		c := uint64(b[at])<<8 | uint64(b[at+1])
		if got := refFold(refSum(orig[start:]) + c); got != 0xffff {
			t.Fatalf("sum with the field %#x", got)
		}
	})
}
