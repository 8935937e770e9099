package main

import "testing"

// perf annotate --stdio's listing: a header, source and label lines
// without an address, then one line per instruction.
const perfAnnotate = ` Percent |	Source code & Disassembly of xvs-main for cpu-clock:ppp (3063 samples, percent: local period)
-------------------------------------------------------------------------------------------------------------
         :
         : 5      0000000000897500 <github.com/xvswitch/xvswitch/vswitch.(*forwarder).forward>:
         : 6      github.com/xvswitch/xvswitch/vswitch.(*forwarder).forward():
    0.00 :   897500: lea    -0x138(%rsp),%r12
    0.00 :   897827: movzbl (%r8),%r8d
   64.05 :   89782b: mov    %r15d,%r11d
    3.46 :   897834: xor    %r8d,%r15d
`

func TestParseAnnotate(t *testing.T) {
	got := parseAnnotate([]byte(perfAnnotate))
	want := []annotatedInsn{
		{0, 0x897500, "lea -0x138(%rsp),%r12"},
		{0, 0x897827, "movzbl (%r8),%r8d"},
		{64.05, 0x89782b, "mov %r15d,%r11d"},
		{3.46, 0x897834, "xor %r8d,%r15d"},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d instructions %+v, want %d", len(got), got, len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("instruction %d: got %+v, want %+v", i, got[i], want[i])
		}
	}
}

// TestHotAndBefore: a hot instruction comes with the one before it, once.
func TestHotAndBefore(t *testing.T) {
	got := hotAndBefore(parseAnnotate([]byte(perfAnnotate)))
	want := []uint64{0x897827, 0x89782b, 0x897834}
	if len(got) != len(want) {
		t.Fatalf("got %+v, want addresses %x", got, want)
	}
	for i, a := range want {
		if got[i].addr != a {
			t.Errorf("instruction %d: got %x, want %x", i, got[i].addr, a)
		}
	}
}
