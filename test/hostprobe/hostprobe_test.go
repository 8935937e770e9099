package hostprobe

import (
	"runtime"
	"strings"
	"testing"
)

func TestCrossCPULatency(t *testing.T) {
	if runtime.NumCPU() < 2 {
		t.Skip("needs 2 CPUs")
	}
	ns, err := CrossCPULatency(0, 1)
	if err != nil {
		t.Fatal(err)
	}
	// Every round trip was answered (or it would have timed out), so the
	// figure is the measured one: positive, and below the 1 s limit
	// spread over the trips.
	if ns <= 0 || ns > 1e9/(2*Trips) {
		t.Fatalf("one way: %.1f ns", ns)
	}
	t.Logf("CPU 0 <-> CPU 1: %.1f ns one way", ns)
}

func TestCrossCPUBadCPU(t *testing.T) {
	if _, err := CrossCPULatency(0, 4095); err == nil || !strings.Contains(err.Error(), "CPU 4095") {
		t.Fatalf("pinning to CPU 4095: %v", err)
	}
}
