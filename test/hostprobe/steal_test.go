package hostprobe

import (
	"runtime"
	"testing"
)

func TestStealMs(t *testing.T) {
	s0, err := StealMs()
	if err != nil {
		t.Fatal(err)
	}
	if len(s0) != runtime.NumCPU() {
		t.Errorf("steal of %d CPUs, want %d: %v", len(s0), runtime.NumCPU(), s0)
	}
	for cpu, ms := range s0 {
		if ms < 0 || ms != float64(int64(ms/10))*10 {
			t.Errorf("CPU %d: %v ms, want a multiple of 10 ms", cpu, ms)
		}
	}
}
