package main

import (
	"bytes"
	"encoding/json"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/xvswitch/xvswitch/test/require"
)

// logWriter sends the harness's progress lines to the test log.
type logWriter struct{ t *testing.T }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// TestSmoke runs the bench in smoke mode (every scenario once, 64 B, split
// ring, half a second per system) and checks what it wrote: a JSON report
// that decodes, with a successful run of each system for every case and a
// non-zero rate (or latency probes, or idle CPU for DPDK's busy poller);
// a Markdown table with a row per case; a PNG that decodes. Speeds are not
// asserted: the machine is shared.
func TestSmoke(t *testing.T) {
	require.Root(t)
	require.Commands(t, "dpdk-testpmd", "stdbuf", "taskset", "ip", "go")
	require.Long(t)
	out := t.TempDir()
	rep, err := runBench(smokeOptions(out), logWriter{t})
	if err != nil {
		t.Fatal(err)
	}
	js, err := os.ReadFile(filepath.Join(out, "bench.json"))
	if err != nil {
		t.Fatal(err)
	}
	var got Report
	if err := json.Unmarshal(js, &got); err != nil {
		t.Fatalf("bench.json: %v", err)
	}
	so := smokeOptions(out)
	want := plan(so.scenarios, so.sizes, so.rings, so.modes, so.paths)
	if len(got.Results) != len(want) || len(got.Results) != len(rep.Results) {
		t.Fatalf("bench.json has %d results, the plan %d", len(got.Results), len(want))
	}
	for i, res := range got.Results {
		if res.ID != want[i].ID {
			t.Errorf("result %d is %s, want %s", i, res.ID, want[i].ID)
		}
		sums := []struct {
			name string
			sum  SysSummary
		}{{sysXvswitch, res.Xvswitch}, {sysDPDK, res.DPDK}}
		if res.has(sysXvswitchZerocopy) {
			sums = append(sums, struct {
				name string
				sum  SysSummary
			}{sysXvswitchZerocopy, res.summary(sysXvswitchZerocopy)})
		}
		for _, s := range sums {
			if s.sum.Runs != 1 {
				t.Errorf("%s %s: %d successful runs, want 1: %+v", res.ID, s.name, s.sum.Runs, res.Runs)
				continue
			}
			if s.sum.PeakRSSMiB <= 0 {
				t.Errorf("%s %s: peak RSS %v", res.ID, s.name, s.sum.PeakRSSMiB)
			}
			switch res.Kind {
			case kindRate:
				if s.sum.BestMpps <= 0 {
					t.Errorf("%s %s: rate %v Mpps", res.ID, s.name, s.sum.BestMpps)
				}
			case kindLatency:
				if s.sum.Latency == nil || s.sum.Latency.Probes < smokeOptions(out).probes || s.sum.Latency.MedianP50 <= 0 {
					t.Errorf("%s %s: latency %+v", res.ID, s.name, s.sum.Latency)
				}
			}
		}
		// Every run read its switch's drops and threads over the window;
		// xvswitch's worker had its CPU to itself (-runtime-cpus).
		for _, run := range res.Runs {
			if run.Error != "" {
				continue
			}
			if run.WindowDrops == nil || run.Placement == nil || len(run.Placement.Threads) == 0 {
				t.Errorf("%s %s: no window drops or thread placement: %+v %+v", res.ID, run.System, run.WindowDrops, run.Placement)
				continue
			}
			// Each xvswitch path shows in its path counters: the
			// zero-copy system's frames mostly zero-copy, the copy
			// system's all copied.
			if res.Kind == kindRate && zerocopyScenario(res.Scenario) && run.System != sysDPDK {
				var zc, copied uint64
				for _, p := range run.PathWindow {
					zc, copied = zc+p.ZerocopyFrames, copied+p.CopiedFrames
				}
				if run.System == sysXvswitch && (zc != 0 || copied == 0) || run.System == sysXvswitchZerocopy && zc <= copied {
					t.Errorf("%s %s: %d frames zero-copy, %d copied in the window: %+v", res.ID, run.System, zc, copied, run.PathWindow)
				}
			}
			if run.System != sysDPDK {
				if ok := run.Placement.RuntimeOffWorkerCPU; ok == nil || !*ok || len(run.Placement.workerTIDs()) != 1 {
					t.Errorf("%s: xvswitch's worker shared its CPU: %v %+v", res.ID, run.Placement.Violations, run.Placement.Threads)
				}
			}
		}
		// DPDK polls even when idle: an idle run that saw no CPU
		// time measured nothing.
		if res.Kind == kindIdle && res.DPDK.CPUSeconds <= 0 {
			t.Errorf("%s: DPDK idle CPU %v s", res.ID, res.DPDK.CPUSeconds)
		}
	}
	if got.Failed != 0 {
		t.Errorf("%d runs failed", got.Failed)
	}
	md, err := os.ReadFile(filepath.Join(out, "bench.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range want {
		if !strings.Contains(string(md), "| "+c.Title) {
			t.Errorf("bench.md has no row for %s", c.ID)
		}
	}
	pngBytes, err := os.ReadFile(filepath.Join(out, "bench.png"))
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(pngBytes))
	if err != nil {
		t.Fatalf("bench.png: %v", err)
	}
	if b := img.Bounds(); b.Dx() < 400 || b.Dy() < 300 {
		t.Errorf("bench.png is %v", b)
	}
	t.Logf("\n%s", md)
}
