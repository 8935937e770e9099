package virtionet

import "testing"

func TestOffloadMoved(t *testing.T) {
	o := MakeOffload(Header{Flags: FlagNeedsCsum, GSOType: GSOTCPv4, HdrLen: 54, GSOSize: 1448, CsumStart: 34, CsumOffset: 16})
	p := o.Moved(4).Header()
	if p.CsumStart != 38 || p.HdrLen != 58 || p.CsumOffset != 16 || p.GSOSize != 1448 || p.Flags != FlagNeedsCsum || p.GSOType != GSOTCPv4 {
		t.Fatalf("pushed: %+v", p)
	}
	if back := o.Moved(4).Moved(-4); back != o {
		t.Fatalf("pushed and popped: %+v, want %+v", back.Header(), o.Header())
	}
	if (Offload{}).Moved(4) != (Offload{}) {
		t.Fatal("a plain frame got offload metadata")
	}
}
